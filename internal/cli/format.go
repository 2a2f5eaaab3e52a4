package cli

import "strconv"

func uitoa(u uint64) string { return strconv.FormatUint(u, 10) }
