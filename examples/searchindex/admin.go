package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// handler is the admin API. POST /rebuild starts a rebuild in the
// background and answers 202 with its fence and start time, or answers
// 409 at once, with the running rebuild's owner and start time, when one
// is running anywhere in the fleet. It never waits for the lock: an admin
// clicking "rebuild" twice must get an answer, not a hung request.
func (r *rebuilder) handler(base context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rebuild", func(w http.ResponseWriter, req *http.Request) {
		lease, started, held, err := r.start(req.Context(), 0)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case held != nil:
			reply(w, http.StatusConflict, map[string]any{"error": "a rebuild is already running", "running": held})
		default:
			r.wg.Go(func() {
				if err := r.rebuild(base, lease); err != nil {
					r.printf("rebuild failed: %v", err)
				}
			})
			reply(w, http.StatusAccepted, map[string]any{"started": running{Owner: lease.Owner(), Fence: lease.Fence(), StartedAt: started}})
		}
	})
	return mux
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// wait blocks until every background rebuild has ended.
func (r *rebuilder) wait() { r.wg.Wait() }

// serve runs the admin API until ctx is done, then waits for a running
// rebuild to stop (its lease's context is canceled with ctx).
func serve(ctx context.Context, addr string, r *rebuilder, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r.handler(ctx), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	r.wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
