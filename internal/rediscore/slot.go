package rediscore

import (
	"strconv"
	"strings"
	"sync"
)

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// Slot is Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag, or of
// the whole key when it has no non-empty {tag}, modulo 16384.
func Slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % slots)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	tagsOnce sync.Once
	tags     []string
)

// slotTag returns a short hash tag whose key slot is slot: the smallest
// base-36 number that hashes there. The table is built once, on first use
// (about 150,000 CRC16s of 1-4 bytes).
func slotTag(slot int) string {
	tagsOnce.Do(func() {
		tags = make([]string, slots)
		for i, left := 0, slots; left > 0; i++ {
			t := strconv.FormatInt(int64(i), 36)
			if s := crc16(t) % slots; tags[s] == "" {
				tags[s] = t
				left--
			}
		}
	})
	return tags[slot]
}
