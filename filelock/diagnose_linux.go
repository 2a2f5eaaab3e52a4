package filelock

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsMagic is the statfs(2) type of the file system holding path (its
// directory when the file does not exist yet).
func fsMagic(path string) (int64, error) {
	var st unix.Statfs_t
	err := unix.Statfs(path, &st)
	if err != nil {
		err = unix.Statfs(filepath.Dir(path), &st)
	}
	return int64(st.Type), err
}
