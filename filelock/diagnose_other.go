//go:build !linux

package filelock

import "errors"

// fsMagic is only implemented on Linux.
func fsMagic(string) (int64, error) {
	return 0, errors.New("file system type checks are implemented on Linux only")
}
