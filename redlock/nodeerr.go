package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// errNodeTimeout stands for a node that did not answer in time.
var errNodeTimeout = errors.New("no answer within the node timeout")

// nodeErr names the node an error came from. A request that ran out of
// its node timeout reports errNodeTimeout, not the context's error: the
// caller's context is fine, and the portable layer must not take a slow
// node for a canceled wait.
func (d *redlock) nodeErr(i int, err error) error {
	var op *net.OpError
	_, named := err.(connectError)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		err = errNodeTimeout
	case !named && errors.As(err, &op) && op.Op == "dial":
		err = connectError{err} // go-redis's own dial, when it gives up in time
	}
	return fmt.Errorf("redlock node %s: %w", d.nodes[i].addr, rediscore.Classify(err))
}

// diagnose is nodeErr for request err of node i, made with context req,
// while the caller waits until waiting is closed. go-redis dials a new
// connection in the background and retries a failed dial after a backoff
// (100 ms by default), so a request to a node that refuses connections
// ends at its node timeout with only its context's error. When a request
// ran out of its node timeout and its caller still waits, diagnose dials
// the node once more, bounded by half the node timeout, and reports what
// that dial says: "connection refused", a TLS failure... A dial that
// succeeds or times out leaves errNodeTimeout: the node is slow, paused or
// unreachable.
func (d *redlock) diagnose(req context.Context, waiting <-chan struct{}, i int, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) || isClosed(waiting) {
		return d.nodeErr(i, err)
	}
	if cause := d.nodes[i].probe(context.WithoutCancel(req), d.cfg.nodeTimeout/2); cause != nil {
		return d.nodeErr(i, cause)
	}
	return d.nodeErr(i, err)
}

// probe dials the node once with its client's own dialer, within the
// given time, and returns why it could not connect: nil when it could,
// when it ran out of time, or when the client type has no single dialer.
func (n *node) probe(ctx context.Context, within time.Duration) error {
	rc, ok := n.client.(*redis.Client)
	if !ok || within <= 0 {
		return nil
	}
	o := rc.Options()
	if o.Dialer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	conn, err := o.Dialer(ctx, o.Network, o.Addr)
	if err == nil {
		_ = conn.Close()
		return nil
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return nil
	}
	return connectError{err}
}

// connectError is a failed dial to a node. Its message is the reason
// alone ("cannot connect: connection refused"): nodeErr names the node,
// which net.OpError would repeat.
type connectError struct{ err error }

func (e connectError) Error() string {
	reason := e.err
	var op *net.OpError
	if errors.As(reason, &op) && op.Err != nil {
		reason = op.Err
	}
	var sys *os.SyscallError
	if errors.As(reason, &sys) {
		reason = sys.Err
	}
	return "cannot connect: " + reason.Error()
}

func (e connectError) Unwrap() error { return e.err }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// nodeErrors is the errors of several nodes, printed on one line
// separated by "; ". errors.Is and errors.As see each of them
// (driver.ErrPermanent, *redis.Error...).
type nodeErrors []error

// joinNodes returns the errors as one nodeErrors, or nil when there are
// none.
func joinNodes(errs []error) error {
	var out nodeErrors
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (e nodeErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the nodes' errors.
func (e nodeErrors) Unwrap() []error { return e }
