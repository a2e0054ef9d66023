//go:build !unix

package rebound

import "syscall"

// errnoName is empty off Unix: Windows errnos have no portable symbolic names,
// and the message still reaches the sidecar.
func errnoName(syscall.Errno) string { return "" }
