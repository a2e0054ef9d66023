// Package gocase is what the Go generators of real cases share (go_stores, go_sdks): the ports
// their cases meet, written as fixed numbers in the cases, and the printing of one labelled case
// read from an error as the Go client reads it.
package gocase

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	rebound "github.com/rebound-dev/rebound/clients/go"
)

// retryable are the categories an agent may retry, as the cases' `retryable` says.
var retryable = map[string]bool{"timeout": true, "rate_limited": true, "network": true, "unavailable": true, "internal": true}

// Listen is a listener on a random loopback port.
func Listen() net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return l
}

// Port is a listener's port number, as text.
func Port(l net.Listener) string { return fmt.Sprint(l.Addr().(*net.TCPAddr).Port) }

// ClosedPort is a loopback port nothing listens on.
func ClosedPort() string {
	l := Listen()
	defer l.Close()
	return Port(l)
}

// SilentPort is a loopback port that accepts connections and never answers, and the function
// that closes it and them.
func SilentPort() (string, func()) {
	l := Listen()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return Port(l), func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}
}

// Version is a module's path and version as this build resolved it.
func Version(path string) string {
	info, _ := debug.ReadBuildInfo()
	for _, dep := range info.Deps {
		if dep.Path == path {
			return path + " " + dep.Version
		}
	}
	return path
}

// Printer prints labelled cases, their ports rewritten by Ports (a random port to its fixed number:
// 8787 a server of the generator's own, 8799 the closed port, 8798 the silent one).
type Printer struct {
	Ports *strings.Replacer
}

// Emit prints the labelled case of err as one JSON line, read as the Go client reads it (with opts, as
// an agent passes them): its message, type, code, HTTP status and the headers the client keeps.
func (p Printer) Emit(id, category, source string, err error, opts ...rebound.ReportOption) {
	if err == nil {
		fmt.Fprintf(os.Stderr, "%s: did not fail\n", id)
		return
	}
	o, readErr := rebound.OutcomeFromError("tool", err, opts...)
	if readErr != nil {
		panic(readErr)
	}
	outcome := map[string]any{"message": p.Ports.Replace(o.Message)}
	if o.ExceptionType != "" {
		outcome["exception_type"] = o.ExceptionType
	}
	if o.Code != "" {
		outcome["code"] = o.Code
	}
	if o.HttpStatus != 0 {
		outcome["http_status"] = o.HttpStatus
	}
	if len(o.Headers) > 0 {
		headers := map[string]string{}
		for k, v := range o.Headers {
			headers[strings.ToLower(k)] = v
		}
		outcome["headers"] = headers
	}
	line, _ := json.Marshal(map[string]any{"id": id, "source": source, "category": category,
		"retryable": retryable[category], "tags": []string{}, "outcome": outcome})
	fmt.Println(string(line))
}
