//go:build unix

package rebound

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// errnoName is the errno's symbolic name (ECONNREFUSED), which the sidecar's rules match.
func errnoName(e syscall.Errno) string { return unix.ErrnoName(e) }
