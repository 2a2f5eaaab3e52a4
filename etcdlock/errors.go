package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// permanentErrs are etcd's answers that retrying cannot cure.
var permanentErrs = []error{
	rpctypes.ErrAuthFailed,
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrUserEmpty,
	rpctypes.ErrUserNotFound,
	rpctypes.ErrAuthNotEnabled,
	rpctypes.ErrRoleNotGranted,
	rpctypes.ErrTooManyOps,
	rpctypes.ErrRequestTooLarge,
}

// fail prepares a backend error for the portable layer: errors retrying
// cannot cure are marked driver.Permanent, and a call that ran out of time
// while the client had no working connection says so and names the
// endpoints (etcd's client otherwise waits for a connection silently until
// the deadline). ctx's own error stays matchable.
func (d *etcdDriver) fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if isPermanent(err) {
		return driver.Permanent(err)
	}
	if ctx.Err() != nil || isCtxErr(err) {
		if why := d.unreachable(); why != "" {
			return fmt.Errorf("%s: %w", why, err)
		}
	}
	return err
}

func isPermanent(err error) bool {
	if errors.Is(err, driver.ErrPermanent) {
		return true
	}
	for _, p := range permanentErrs {
		if errors.Is(err, p) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.PermissionDenied:
		return true
	}
	return false
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// unreachable describes a client without a working connection, or returns
// "" when its connection is up.
func (d *etcdDriver) unreachable() string {
	conn := d.cli.ActiveConnection()
	if conn == nil {
		return ""
	}
	switch st := conn.GetState(); st {
	case connectivity.Ready, connectivity.Idle:
		return ""
	default:
		return fmt.Sprintf("no etcd endpoint reachable (%s; connection %s)", strings.Join(d.cli.Endpoints(), ", "), strings.ToLower(st.String()))
	}
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
