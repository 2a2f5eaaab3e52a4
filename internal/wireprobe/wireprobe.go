// Package wireprobe tells which protocol a server speaks, so that a URL
// whose port belongs to another kind of server (a postgres:// URL at a
// Redis port) is reported as such instead of as a timeout or an EOF.
// Each probe is one short connection, bounded by Wait.
package wireprobe

import (
	"bytes"
	"io"
	"net"
	"time"
)

// Wait bounds each probe: the dial, the write and the reply.
const Wait = time.Second

// sslRequest is PostgreSQL's SSLRequest message: length 8, code 80877103.
var sslRequest = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

// Ping sends an inline Redis PING to addr and returns the reply, up to 64
// bytes (nil when none came within Wait). A Redis server answers it (see
// IsRedis); PostgreSQL closes the connection without a word.
func Ping(network, addr string) []byte {
	return ask(network, addr, []byte("PING\r\n"), 64)
}

// IsRedis reports whether reply is a Redis server's: a RESP simple string
// or error ("+PONG", "-NOAUTH ...").
func IsRedis(reply []byte) bool {
	return len(reply) > 2 && (reply[0] == '+' || reply[0] == '-') && bytes.Contains(reply, []byte("\r\n"))
}

// Postgres reports whether the server at addr answers an SSLRequest as
// PostgreSQL does: one byte, S (TLS) or N (no TLS).
func Postgres(network, addr string) bool {
	b := ask(network, addr, sslRequest, 1)
	return len(b) == 1 && (b[0] == 'S' || b[0] == 'N')
}

// ask sends msg to addr and returns what came back within Wait, up to n
// bytes (nil on any failure).
func ask(network, addr string, msg []byte, n int) []byte {
	c, err := net.DialTimeout(network, addr, Wait)
	if err != nil {
		return nil
	}
	defer c.Close()
	if c.SetDeadline(time.Now().Add(Wait)) != nil {
		return nil
	}
	if _, err := c.Write(msg); err != nil {
		return nil
	}
	b := make([]byte, n)
	got, err := io.ReadAtLeast(c, b, 1)
	if err != nil {
		return nil
	}
	return b[:got]
}
