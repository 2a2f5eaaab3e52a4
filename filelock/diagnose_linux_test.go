package filelock

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestClassifyFS checks the file-system table against golang.org/x/sys's
// constants (from linux/magic.h) and literal magic numbers where x/sys has
// none: network file systems are unsafe, local ones are not.
func TestClassifyFS(t *testing.T) {
	for _, tc := range []struct {
		magic   int64
		network bool
	}{
		{unix.NFS_SUPER_MAGIC, true},
		{unix.SMB_SUPER_MAGIC, true},
		{unix.CIFS_SUPER_MAGIC, true},
		{unix.SMB2_SUPER_MAGIC, true},
		{unix.V9FS_MAGIC, true},
		{unix.FUSE_SUPER_MAGIC, true},
		{unix.CEPH_SUPER_MAGIC, true},
		{unix.AFS_SUPER_MAGIC, true},
		{unix.CODA_SUPER_MAGIC, true},
		{unix.OCFS2_SUPER_MAGIC, true},
		{0x01161970, true}, // GFS2
		{unix.EXT4_SUPER_MAGIC, false},
		{unix.XFS_SUPER_MAGIC, false},
		{unix.BTRFS_SUPER_MAGIC, false},
		{unix.TMPFS_MAGIC, false},
		{unix.OVERLAYFS_SUPER_MAGIC, false},
		{unix.F2FS_SUPER_MAGIC, false},
		{0x2fc12fc1, false}, // ZFS
		// statfs's f_type is a signed long: a magic with the top bit set
		// may come back sign-extended.
		{int64(int32(-0x00acb2be)), true}, // 0xff534d42, CIFS, as a negative int32
	} {
		name, network, known := classifyFS(tc.magic)
		if !known || network != tc.network || name == "" {
			t.Errorf("classifyFS(%#x) = %q, network %v, known %v; want network %v", tc.magic, name, network, known, tc.network)
		}
	}
	if _, _, known := classifyFS(0x12345678); known {
		t.Error("an unknown magic number was classified")
	}
}

// TestFSFindingOnThisHost: the test's temp dir is on a local file system.
func TestFSFindingOnThisHost(t *testing.T) {
	magic, err := fsMagic(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, network, _ := classifyFS(magic); network {
		t.Skipf("the temp dir is on a network file system (magic %#x)", magic)
	}
	f := fsFinding(t.TempDir() + "/x.db")
	if f.Verdict == "unsafe" {
		t.Errorf("local temp dir judged unsafe: %+v", f)
	}
}
