package servebench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// watcher reads one lease's events stream.
type watcher struct {
	got    chan struct{} // closed at the end event, or when the stream failed
	gotOne sync.Once

	mu     sync.Mutex
	event  string    // "released" or "lost"
	reason string    // a lost event's reason
	at     time.Time // when it arrived
	ended  bool      // the server closed the stream after it
}

func newWatcher() *watcher { return &watcher{got: make(chan struct{})} }

// result is the end event, when it arrived, and whether the server then
// closed the stream.
func (w *watcher) result() (event string, at time.Time, ended bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.event, w.at, w.ended
}

// lostReason is the reason of the lost event, if one came.
func (w *watcher) lostReason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// run opens the stream (holding a place in sem until "held" arrives),
// reports the open on opened (nil or the error, exactly once), and reads
// events until the server closes the stream or ctx ends.
func (w *watcher) run(ctx context.Context, s *server, id string, sem chan struct{}, opened chan<- error) {
	sem <- struct{}{}
	var openOnce sync.Once
	open := func(err error) {
		openOnce.Do(func() {
			<-sem
			opened <- err
		})
	}
	defer w.gotOne.Do(func() { close(w.got) })
	resp, err := s.api.events(ctx, s.streams, id)
	if err != nil {
		open(err)
		return
	}
	defer resp.Body.Close()
	err = ReadEvents(resp.Body, func(event, data string) {
		switch event {
		case "held":
			open(nil)
		case "released", "lost":
			w.ending(event, data)
		}
	})
	open(fmt.Errorf("servebench: events stream of a lease closed before its held event: %v", err))
	if errors.Is(err, io.EOF) {
		w.mu.Lock()
		w.ended = w.event != ""
		w.mu.Unlock()
	}
}

// ending records the first end event, and a lost event's reason.
func (w *watcher) ending(event, data string) {
	at := time.Now()
	var lost struct {
		Reason string `json:"reason"`
	}
	if event == "lost" && json.Unmarshal([]byte(data), &lost) != nil {
		lost.Reason = "(unreadable data)"
	}
	w.mu.Lock()
	if w.event == "" {
		w.event, w.reason, w.at = event, lost.Reason, at
	}
	w.mu.Unlock()
	w.gotOne.Do(func() { close(w.got) })
}

// ReadEvents parses a text/event-stream, calling on with the name and
// data of each event as its closing blank line arrives; comments are
// skipped. It returns the read error that ended the stream (io.EOF when
// the server closed it).
func ReadEvents(r io.Reader, on func(event, data string)) error {
	br := bufio.NewReader(r)
	var event string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if event != "" {
				on(event, strings.Join(data, "\n"))
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}
