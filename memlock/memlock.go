package memlock

import (
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// Scheme is the URL scheme memlock registers: mem://NAME.
const Scheme = "mem"

// Config configures a Locker on a Store. It has no settings today: the
// in-memory driver has nothing to tune, and its zero value is the only
// one. It exists so that memlock has the shape of every dlock driver.
type Config struct{}

// New returns a Locker on store; opts become its defaults. A nil store is
// an invalid argument.
func New(store *Store, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(store, opts...)
}

// Locker returns a Locker on store configured by c; opts become its
// defaults. Closing the Locker leaves the Store as it is.
func (c Config) Locker(store *Store, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := c.Driver(store)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// Driver returns the bare driver on store, for callers assembling their
// own Locker with dlock.NewLocker. A nil store is an invalid argument.
func (c Config) Driver(store *Store) (driver.Driver, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: memlock: nil *Store", dlock.ErrInvalidArgument)
	}
	return &memDriver{s: store}, nil
}
