// Real Go failures for holdout-real.jsonl: each case runs a standard-library call against something on
// this machine (a loopback server started here, a closed port, files, the resolver) and prints the
// outcome an agent would report, one JSON line per case, labelled beforehand: the error's text (Go
// errors carry no type an agent reports), and for exec's ExitError the exit code and stderr.
//
// Run: go run go_cases.go > go.jsonl (standard library only). Random ports are written as 8787 (the
// server) and 8799 (a closed port).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

var replacer *strings.Replacer

func emit(id, category string, err error) {
	if err == nil {
		fmt.Fprintf(os.Stderr, "%s: did not fail\n", id)
		return
	}
	outcome := map[string]any{"message": replacer.Replace(err.Error())}
	tags := []string{"message-only"}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		outcome["exit_code"] = exit.ExitCode()
		tags = []string{}
		if len(exit.Stderr) > 0 {
			outcome["detail"] = string(exit.Stderr)
		}
	}
	retryable := map[string]bool{"timeout": true, "rate_limited": true, "network": true, "unavailable": true, "internal": true}[category]
	line, _ := json.Marshal(map[string]any{
		"id": id, "source": "Go " + runtime.Version(), "category": category, "retryable": retryable,
		"tags": tags, "outcome": outcome,
	})
	fmt.Println(string(line))
}

func main() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/slow"):
			time.Sleep(2 * time.Second)
		case strings.HasPrefix(r.URL.Path, "/drop"):
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	defer server.Close()
	listener, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := listener.Addr().String()
	listener.Close()
	port := server.URL[strings.LastIndex(server.URL, ":")+1:]
	closedPort := closed[strings.LastIndex(closed, ":")+1:]
	replacer = strings.NewReplacer(port, "8787", closedPort, "8799")

	client := &http.Client{Timeout: 300 * time.Millisecond}
	_, err := client.Get(server.URL + "/slow")
	emit("r-go-http-client-timeout", "timeout", err)
	_, err = http.Get("http://" + closed + "/")
	emit("r-go-http-refused", "network", err)
	_, err = http.Get(server.URL + "/drop")
	emit("r-go-http-dropped", "network", err)
	_, err = http.Get("http://api.nonexistent.invalid/v1")
	emit("r-go-http-dns", "network", err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "GET", server.URL+"/slow", nil)
	_, err = http.DefaultClient.Do(req)
	cancel()
	emit("r-go-http-context-deadline", "timeout", err)
	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", server.URL+"/slow", nil)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = http.DefaultClient.Do(req)
	emit("r-go-http-context-canceled", "cancelled", err)
	_, err = net.DialTimeout("tcp", closed, time.Second)
	emit("r-go-dial-refused", "network", err)

	var args struct {
		Limit int `json:"limit"`
	}
	emit("r-go-json-invalid-character", "format", json.Unmarshal([]byte(`{"limit": ten}`), &args))
	emit("r-go-json-unexpected-end", "format", json.Unmarshal([]byte(`{"limit": 1`), &args))
	emit("r-go-json-wrong-type", "validation", json.Unmarshal([]byte(`{"limit": "ten"}`), &args))

	// What a QueryRow's Scan returns when the query found no row (database/sql's own value: the
	// standard library has no driver to run a query with).
	emit("r-go-sql-no-rows", "not_found", sql.ErrNoRows)

	_, err = os.Open("/srv/agent/reports/q3.csv")
	emit("r-go-open-missing", "not_found", err)
	emit("r-go-mkdir-exists", "conflict", os.Mkdir(os.TempDir(), 0o755))
	_, err = strconv.Atoi("twelve")
	emit("r-go-atoi", "validation", err)
	emit("r-go-exec-missing", "not_found", exec.Command("terraformm", "plan").Run())
	_, err = exec.Command("ls", "/srv/agent/missing").Output()
	emit("r-go-exec-ls", "not_found", err)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	err = exec.CommandContext(ctx, "sleep", "5").Run()
	cancel()
	emit("r-go-exec-killed-by-deadline", "timeout", err)
}
