// Package sidecar starts and stops the real rebound binary for the client's
// tests, benchmark and example runs.
package sidecar

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds how long a start may take; a debug build starts in well under a second.
const readyTimeout = 30 * time.Second

// stopTimeout bounds the drain after SIGTERM before the process is killed.
const stopTimeout = 15 * time.Second

// pauseTimeout is how long every thread may take to stop after SIGSTOP.
const pauseTimeout = 5 * time.Second

// Process is one running sidecar.
type Process struct {
	// GRPC is the address clients dial: host:port or unix:/path.
	GRPC string
	// Metrics is the host:port of the Prometheus endpoint.
	Metrics string

	cmd    *exec.Cmd
	logs   *tail
	exited chan struct{}
	err    error // the Wait result, set before exited closes
}

// Bin returns the sidecar binary: $REBOUND_BIN, or the repository's target/debug/rebound.
func Bin() (string, error) {
	if bin := os.Getenv("REBOUND_BIN"); bin != "" {
		return checkExecutable(bin)
	}
	// This file is clients/go/internal/sidecar/sidecar.go; the repository is four levels up.
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("sidecar: cannot locate the repository; set REBOUND_BIN")
	}
	repo := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	return checkExecutable(filepath.Join(repo, "target", "debug", "rebound"))
}

func checkExecutable(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sidecar: %w", err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("sidecar: the rebound binary is missing (build it or set REBOUND_BIN): %w", err)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("sidecar: %s is not an executable file", abs)
	}
	return abs, nil
}

// Start runs `bin serve --listen listen --metrics-listen 127.0.0.1:0 extra...` and
// waits for its ready line.
func Start(bin, listen string, extra ...string) (*Process, error) {
	args := append([]string{"serve", "--listen", listen, "--metrics-listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	// An os.Pipe rather than StdoutPipe: Wait runs concurrently and must not close our end.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	logs := &tail{max: 16 << 10}
	cmd.Stdout = w
	cmd.Stderr = logs
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("sidecar: starting %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, logs: logs, exited: make(chan struct{})}

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Keep draining so the sidecar never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stdout)
		stdout.Close()
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	select {
	case line, ok := <-lines:
		if !ok {
			<-p.exited
			return nil, fmt.Errorf("sidecar: exited before it was ready (%v); stderr:\n%s", p.err, logs)
		}
		var ready struct {
			Event   string `json:"event"`
			GRPC    string `json:"grpc"`
			Metrics string `json:"metrics"`
		}
		if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Event != "ready" || ready.GRPC == "" {
			p.kill()
			return nil, fmt.Errorf("sidecar: expected a ready line on stdout, got %q", line)
		}
		p.GRPC, p.Metrics = ready.GRPC, ready.Metrics
		return p, nil
	case <-time.After(readyTimeout):
		p.kill()
		return nil, fmt.Errorf("sidecar: not ready after %s; stderr:\n%s", readyTimeout, logs)
	}
}

// Stop sends SIGTERM and waits for the drain; it kills the process if the drain hangs.
// It reports an error unless the sidecar exited 0.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sidecar: SIGTERM: %w", err)
	}
	select {
	case <-p.exited:
		return p.exitError()
	case <-time.After(stopTimeout):
		p.kill()
		return fmt.Errorf("sidecar: did not exit within %s of SIGTERM; killed", stopTimeout)
	}
}

// Pause freezes the sidecar (SIGSTOP): connections stay open but nothing is
// answered, the way an overloaded or hung sidecar behaves. It returns once
// every thread of it has stopped: the signal reaches each thread on its own,
// and one still running could answer a call made right after.
func (p *Process) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(pauseTimeout)
	for !stopped(p.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("sidecar %d: not stopped %s after SIGSTOP", p.cmd.Process.Pid, pauseTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped says whether every thread of process pid is stopped (state T in
// /proc/PID/task/*/stat); true where there is no /proc to read, which leaves
// the signal to do what it can.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if errors.Is(err, os.ErrNotExist) && runtime.GOOS != "linux" {
		return true
	}
	if err != nil {
		return false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			return false // a thread came or went meanwhile: read again
		}
		// The state follows the command's closing parenthesis: "PID (comm) STATE ...".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) == 0 || (fields[0] != "T" && fields[0] != "t") {
			return false
		}
	}
	return true
}

// Resume lets a paused sidecar run again (SIGCONT).
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT) }

func (p *Process) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("sidecar: %s: %w", sig, err)
	}
	return nil
}

// Logs returns the tail of the sidecar's stderr.
func (p *Process) Logs() string { return p.logs.String() }

func (p *Process) exitError() error {
	if p.err != nil {
		return fmt.Errorf("sidecar: %w; stderr:\n%s", p.err, p.logs)
	}
	return nil
}

func (p *Process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// tail keeps the last max bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
