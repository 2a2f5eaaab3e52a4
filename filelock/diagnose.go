package filelock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dlockdev/dlock/driver"
)

var _ driver.Diagnoser = (*fileDriver)(nil)

// Diagnose checks the deployment for `dlock doctor`: the file system under
// the database (a network file system breaks SQLite's locking and WAL:
// unsafe), the journal mode, the busy timeout and the sync level. It only
// reads.
func (d *fileDriver) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	path, err := mainFile(ctx, d.db)
	if err != nil {
		return nil, err
	}
	fs := fsFinding(path)
	journal, err := journalFinding(ctx, d.db)
	if err != nil {
		return nil, err
	}
	busy, err := busyFinding(ctx, d.db)
	if err != nil {
		return nil, err
	}
	syncF, err := syncFinding(ctx, d.db)
	if err != nil {
		return nil, err
	}
	return []driver.Finding{fs, journal, busy, syncF}, nil
}

// mainFile is the database's file name ("" for an in-memory database).
func mainFile(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", err
		}
		if name == "main" {
			return file, rows.Err()
		}
	}
	return "", rows.Err()
}

func fsFinding(path string) driver.Finding {
	f := driver.Finding{Check: "file system"}
	if path == "" {
		f.Verdict, f.Detail = driver.VerdictOK, "in-memory database (this process only)"
		return f
	}
	magic, err := fsMagic(path)
	if err != nil {
		f.Verdict, f.Detail = driver.VerdictWarn, fmt.Sprintf("%s: cannot tell the file system: %v", path, err)
		f.Fix = "make sure the file is on a local disk, not a network file system"
		return f
	}
	name, network, known := classifyFS(magic)
	switch {
	case network:
		f.Verdict = driver.VerdictUnsafe
		f.Detail = fmt.Sprintf("%s is on %s (magic %#x): SQLite's file locks are unreliable there and WAL needs shared memory that a network file system cannot give; two hosts can both be granted the lock", path, name, magic)
		f.Fix = "put the database on a local disk (file:///var/lib/...), or use a server backend (redis://, postgres://, etcd://) to share locks between hosts"
	case known:
		f.Verdict, f.Detail = driver.VerdictOK, fmt.Sprintf("%s is on %s, a local file system", path, name)
	default:
		f.Verdict = driver.VerdictWarn
		f.Detail = fmt.Sprintf("%s is on an unrecognised file system (magic %#x)", path, magic)
		f.Fix = "make sure it is a local disk, not a network file system"
	}
	return f
}

// fsKind is one row of the file-system table.
type fsKind struct {
	name    string
	network bool
}

// fsKinds maps statfs(2) f_type magic numbers (linux/magic.h) to a name,
// and says whether the file system is shared over a network (or through
// FUSE, where sshfs and its like are), where SQLite locking fails.
var fsKinds = map[int64]fsKind{
	0x6969:     {"NFS", true},
	0x517b:     {"SMB", true},
	0xff534d42: {"CIFS/SMB", true},
	0xfe534d42: {"SMB2/SMB3", true},
	0x01021997: {"9p (v9fs)", true},
	0x65735546: {"FUSE (sshfs, s3fs, virtiofs, ...)", true},
	0x00c36400: {"Ceph", true},
	0x5346414f: {"AFS", true},
	0x6b414653: {"AFS", true},
	0x73757245: {"Coda", true},
	0x564c:     {"NCP (NetWare)", true},
	0x7461636f: {"OCFS2 (cluster)", true},
	0x01161970: {"GFS2 (cluster)", true},
	0x0bd00bd0: {"Lustre", true},
	0x47504653: {"GPFS", true},
	0x786f4256: {"VirtualBox shared folder (vboxsf)", true},
	0xef53:     {"ext2/3/4", false},
	0x58465342: {"XFS", false},
	0x9123683e: {"Btrfs", false},
	0x2fc12fc1: {"ZFS", false},
	0xf2f52010: {"F2FS", false},
	0xca451a4e: {"bcachefs", false},
	0x01021994: {"tmpfs", false},
	0x858458f6: {"ramfs", false},
	0x794c7630: {"overlayfs", false},
	0x52654973: {"ReiserFS", false},
	0x3153464a: {"JFS", false},
	0x3434:     {"NILFS", false},
	0xf15f:     {"eCryptfs", false},
	0x4d44:     {"FAT", false},
	0x2011bab0: {"exFAT", false},
	0x5346544e: {"NTFS", false},
}

// classifyFS names the file system with statfs(2) magic number magic and
// says whether it is shared over a network (where the file backend is
// unsafe); known is false for a magic number not in the table.
func classifyFS(magic int64) (name string, network, known bool) {
	k, ok := fsKinds[magic&0xffffffff]
	return k.name, k.network, ok
}

func journalFinding(ctx context.Context, db *sql.DB) (driver.Finding, error) {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return driver.Finding{}, err
	}
	f := driver.Finding{Check: "journal mode", Detail: "journal_mode=" + mode}
	if mode == "wal" {
		f.Verdict = driver.VerdictOK
		return f, nil
	}
	f.Verdict = driver.VerdictWarn
	f.Detail += ": readers block the writer, so a refresh can wait behind another process's read"
	f.Fix = "open the database with _pragma=journal_mode(WAL) (filelock.New and file:// URLs do)"
	return f, nil
}

func busyFinding(ctx context.Context, db *sql.DB) (driver.Finding, error) {
	var ms int
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return driver.Finding{}, err
	}
	f := driver.Finding{Check: "busy timeout", Detail: fmt.Sprintf("busy_timeout=%dms", ms)}
	if ms > 0 {
		f.Verdict = driver.VerdictOK
		return f, nil
	}
	f.Verdict = driver.VerdictWarn
	f.Detail += ": a call that meets another process's write fails at once with SQLITE_BUSY"
	f.Fix = fmt.Sprintf("open the database with _pragma=busy_timeout(%d) (filelock.New and file:// URLs do)", BusyTimeout)
	return f, nil
}

func syncFinding(ctx context.Context, db *sql.DB) (driver.Finding, error) {
	var level int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
		return driver.Finding{}, err
	}
	f := driver.Finding{Check: "sync", Verdict: driver.VerdictOK}
	switch level {
	case 0:
		f.Verdict = driver.VerdictWarn
		f.Detail = "synchronous=off: an OS crash or power cut can undo recent grants and hand their fences out again"
		f.Fix = "use sync=normal (the default) or sync=full in the file URL"
	case 1:
		f.Detail = "synchronous=normal: safe against process crashes; a power cut can undo the last grants after their holders died with the host (sync=full closes that)"
	default:
		f.Detail = "synchronous=full: every grant is on disk before it is returned"
	}
	return f, nil
}
