// A Go HTTP handler that panics: net/http recovers it and logs the stack. Kept apart from
// go-panics, whose deadlock scenario needs a program without the network poller.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"time"
)

type Store struct{ byID map[string]*Order }
type Order struct{ Total int }

func (s *Store) handleOrder(w http.ResponseWriter, r *http.Request) {
	order := s.byID[r.URL.Query().Get("id")]
	fmt.Fprintf(w, "%d", order.Total)
}

// httpHandlerPanic: net/http recovers a handler's panic and logs it with the stack.
func httpHandlerPanic() {
	store := &Store{byID: map[string]*Order{}}
	server := httptest.NewServer(http.HandlerFunc(store.handleOrder))
	defer server.Close()
	resp, err := http.Get(server.URL + "/orders?id=o-42")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	os.Exit(1)
}

// goroutineDump: a server with workers blocked on their queues gets SIGQUIT, and the
// runtime prints every goroutine, as an operator's kill -QUIT does.
func goroutineDump() {
	queue := make(chan string)
	var mu sync.Mutex
	for i := 0; i < 4; i++ {
		go func() {
			for job := range queue {
				mu.Lock()
				_ = job
				mu.Unlock()
			}
		}()
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queue <- r.URL.Path
	}))
	defer server.Close()
	go http.Get(server.URL + "/jobs/1")
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGQUIT)
	time.Sleep(time.Second)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "goroutine_dump" {
		goroutineDump()
		return
	}
	httpHandlerPanic()
}
