// Real failures of the Go clients of data stores, SSH and WebSockets that agents' tools use, for
// holdout-real.jsonl: pgx, go-redis, the MongoDB driver, go-sql-driver/mysql, gorilla/websocket and
// x/crypto/ssh, at a closed port, at a port that accepts and never answers, and against servers of their
// own here (an SSH server of x/crypto/ssh that refuses the password, an HTTP server refusing the
// WebSocket upgrade). Each outcome is read from the error by the Go client itself (clients/go's
// OutcomeFromError, with the HTTP response where the library hands one back, as an agent would pass it),
// one JSON line per case, labelled beforehand.
//
// Run: go run . > go-stores.jsonl (in this folder; its go.mod names the modules). Random ports are written
// as 8787 (a server of its own), 8799 (a closed port) and 8798 (the port that never answers).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"
	rebound "github.com/rebound-dev/rebound/clients/go"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/crypto/ssh"
	"rebound.dev/classification/gocase"
)

func main() {
	// A closed port; a port that accepts and never answers; an SSH server that refuses every password.
	closed := gocase.ClosedPort()
	silent, stopSilent := gocase.SilentPort()
	defer stopSilent()
	sshListener := gocase.Listen()
	sshPort := gocase.Port(sshListener)
	go serveSSH(sshListener)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "missing api key", http.StatusUnauthorized)
	}))
	defer refusing.Close()
	refusingPort := refusing.URL[strings.LastIndex(refusing.URL, ":")+1:]
	emit := gocase.Printer{Ports: strings.NewReplacer(closed, "8799", silent, "8798", sshPort, "8787", refusingPort, "8787")}.Emit
	version := gocase.Version
	ctx := context.Background()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }

	// ---------------------------------------------------------------- pgx
	PGX := version("github.com/jackc/pgx/v5")
	_, err := pgx.Connect(ctx, "postgres://agent@127.0.0.1:"+closed+"/app")
	emit("r-go-pgx-refused", "network", PGX, err)
	_, err = pgx.Connect(ctx, "postgres://agent@127.0.0.1:"+silent+"/app?connect_timeout=1")
	emit("r-go-pgx-no-answer", "timeout", PGX, err)
	// A password with an @ in it, not percent-encoded: the tool's configured URL, which no retry fixes.
	_, err = pgx.Connect(ctx, "postgres://agent:p@ss:word@127.0.0.1:"+closed+"/app")
	emit("r-go-pgx-bad-url", "validation", PGX, err)

	// ---------------------------------------------------------------- go-redis
	REDIS := version("github.com/redis/go-redis/v9")
	err = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + closed, MaxRetries: -1}).Ping(ctx).Err()
	emit("r-go-redis-refused", "network", REDIS, err)
	err = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + silent, MaxRetries: -1, ReadTimeout: time.Second}).Ping(ctx).Err()
	emit("r-go-redis-no-answer", "timeout", REDIS, err)

	// ---------------------------------------------------------------- the MongoDB driver
	MONGO := version("go.mongodb.org/mongo-driver/v2")
	ping := func(uri string) error {
		client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(800 * time.Millisecond).SetConnectTimeout(300 * time.Millisecond))
		if err != nil {
			return err
		}
		return client.Ping(ctx, nil)
	}
	emit("r-go-mongo-refused", "network", MONGO, ping("mongodb://127.0.0.1:"+closed))
	emit("r-go-mongo-no-answer", "timeout", MONGO, ping("mongodb://127.0.0.1:"+silent))
	emit("r-go-mongo-bad-uri", "validation", MONGO, ping("mongodb://app:p@ss@127.0.0.1/db"))

	// ---------------------------------------------------------------- go-sql-driver/mysql
	MYSQL := version("github.com/go-sql-driver/mysql")
	mysqlPing := func(addr string) error {
		config := mysql.NewConfig()
		config.User, config.Net, config.Addr, config.Timeout, config.ReadTimeout = "agent", "tcp", addr, time.Second, time.Second
		db, err := sql.Open("mysql", config.FormatDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		c, cancel := short()
		defer cancel()
		return db.PingContext(c)
	}
	_ = mysql.SetLogger(mysql.Logger(nopLogger{}))
	emit("r-go-mysql-refused", "network", MYSQL, mysqlPing("127.0.0.1:"+closed))
	emit("r-go-mysql-no-answer", "timeout", MYSQL, mysqlPing("127.0.0.1:"+silent))

	// ---------------------------------------------------------------- gorilla/websocket
	WS := version("github.com/gorilla/websocket")
	dialer := websocket.Dialer{HandshakeTimeout: time.Second}
	_, _, err = dialer.Dial("ws://127.0.0.1:"+closed+"/events", nil)
	emit("r-go-websocket-refused", "network", WS, err)
	_, _, err = dialer.Dial("ws://127.0.0.1:"+silent+"/events", nil)
	emit("r-go-websocket-no-answer", "timeout", WS, err)
	_, resp, err := dialer.Dial("ws"+strings.TrimPrefix(refusing.URL, "http")+"/events", nil)
	emit("r-go-websocket-401", "auth", WS, err, rebound.WithResponse(resp))

	// ---------------------------------------------------------------- x/crypto/ssh
	SSH := version("golang.org/x/crypto")
	sshDial := func(addr string, config *ssh.ClientConfig) error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		_, _, _, err = ssh.NewClientConn(conn, addr, config)
		return err
	}
	password := &ssh.ClientConfig{User: "agent", Auth: []ssh.AuthMethod{ssh.Password("x")}, HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	emit("r-go-ssh-refused", "network", SSH, sshDial("127.0.0.1:"+closed, password))
	emit("r-go-ssh-no-answer", "timeout", SSH, sshDial("127.0.0.1:"+silent, password))
	emit("r-go-ssh-not-ssh", "network", SSH, sshDial("127.0.0.1:"+refusingPort, password))
	emit("r-go-ssh-password-refused", "auth", SSH, sshDial("127.0.0.1:"+sshPort, password))
	// The server's key is not the one the tool knows: a changed host or a man in the middle, for a human to check.
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ssh.NewPublicKey(other)
	known := &ssh.ClientConfig{User: "agent", Auth: []ssh.AuthMethod{ssh.Password("x")}, HostKeyCallback: ssh.FixedHostKey(otherKey)}
	emit("r-go-ssh-host-key-mismatch", "auth", SSH, sshDial("127.0.0.1:"+sshPort, known))
}

// serveSSH answers each connection as an SSH server that refuses every password.
func serveSSH(l net.Listener) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(key)
	config := &ssh.ServerConfig{PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) {
		return nil, fmt.Errorf("password rejected")
	}}
	config.AddHostKey(signer)
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_, _, _, _ = ssh.NewServerConn(conn, config)
		}()
	}
}

// nopLogger keeps the mysql driver's own log lines off stderr.
type nopLogger struct{}

func (nopLogger) Print(...any) {}
