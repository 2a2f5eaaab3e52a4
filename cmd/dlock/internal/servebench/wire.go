package servebench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// wire sends the workloads' requests as a plain synchronous HTTP/1.1
// client does (curl, Python's http.client): each request is written on a
// keep-alive connection and its answer read back by the calling
// goroutine. net/http's Transport hands every request to two goroutines
// of its connection and back, a cost of the client's design that runs in
// this process, on the cores the server needs, and that the library side
// has no counterpart of: measured against the server, it is a quarter of
// the process's CPU.
type wire struct {
	addr string // host:port

	mu   sync.Mutex
	idle []*wireConn
	all  map[*wireConn]struct{} // every open connection, for close
}

// wireConn is one keep-alive connection.
type wireConn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when it went idle
}

// maxIdleAge is how long an idle connection is reused: well within the
// server's IdleTimeout, so that a request never races the server closing
// it.
const maxIdleAge = 30 * time.Second

func newWire(addr string) *wire { return &wire{addr: addr, all: map[*wireConn]struct{}{}} }

// do sends one request (body nil: none) and returns the status and the
// answer's body, read whole.
func (w *wire) do(ctx context.Context, method, path, token string, body []byte) (int, []byte, error) {
	wc, err := w.get(ctx)
	if err != nil {
		return 0, nil, err
	}
	code, data, keep, err := wc.roundTrip(ctx, w.addr, method, path, token, body)
	if err != nil || !keep {
		w.drop(wc)
		return code, data, err
	}
	w.put(wc)
	return code, data, nil
}

// roundTrip writes the request and reads the answer; keep says whether
// the connection may carry another. ctx's end aborts it.
func (wc *wireConn) roundTrip(ctx context.Context, host, method, path, token string, body []byte) (code int, data []byte, keep bool, err error) {
	stop := context.AfterFunc(ctx, func() { _ = wc.c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		// ctx ended as the exchange did: the deadline may be set on the
		// connection now or a moment later, and would fail the next
		// request on it ("i/o timeout"). Do not reuse it.
		if !stop() {
			keep = false
		}
	}()
	wc.writeRequest(host, method, path, token, body)
	if err := wc.bw.Flush(); err != nil {
		return 0, nil, false, ctxErr(ctx, err)
	}
	resp, err := http.ReadResponse(wc.br, nil)
	if err != nil {
		return 0, nil, false, ctxErr(ctx, err)
	}
	data, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, nil, false, ctxErr(ctx, err)
	}
	return resp.StatusCode, data, !resp.Close, nil
}

// writeRequest buffers the request line, headers and body.
func (wc *wireConn) writeRequest(host, method, path, token string, body []byte) {
	bw := wc.bw
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\nAuthorization: Bearer ")
	bw.WriteString(token)
	if body != nil {
		bw.WriteString("\r\nContent-Type: application/json")
	}
	bw.WriteString("\r\nContent-Length: ")
	bw.WriteString(strconv.Itoa(len(body)))
	bw.WriteString("\r\n\r\n")
	bw.Write(body)
}

// ctxErr is ctx's error when ctx ended (the deadline set then broke the
// connection), else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// get returns an idle connection young enough, or dials one.
func (w *wire) get(ctx context.Context) (*wireConn, error) {
	w.mu.Lock()
	for len(w.idle) > 0 {
		wc := w.idle[len(w.idle)-1]
		w.idle = w.idle[:len(w.idle)-1]
		if time.Since(wc.used) < maxIdleAge {
			w.mu.Unlock()
			return wc, nil
		}
		w.closeLocked(wc)
	}
	w.mu.Unlock()
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return nil, err
	}
	wc := &wireConn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
	w.mu.Lock()
	w.all[wc] = struct{}{}
	w.mu.Unlock()
	return wc, nil
}

// put makes wc idle.
func (w *wire) put(wc *wireConn) {
	wc.used = time.Now()
	w.mu.Lock()
	w.idle = append(w.idle, wc)
	w.mu.Unlock()
}

// drop closes wc.
func (w *wire) drop(wc *wireConn) {
	w.mu.Lock()
	w.closeLocked(wc)
	w.mu.Unlock()
}

func (w *wire) closeLocked(wc *wireConn) {
	_ = wc.c.Close()
	delete(w.all, wc)
}

// close closes every connection, idle or not.
func (w *wire) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wc := range w.all {
		_ = wc.c.Close()
	}
	clear(w.all)
	w.idle = nil
}
