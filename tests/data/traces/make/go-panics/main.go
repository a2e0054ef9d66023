// Go failures for the trace set: each scenario really panics or deadlocks; the
// runtime's output becomes one file. Run by regenerate.sh: go run . NAME.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

type Cache struct{ entries map[string]int }

func (c *Cache) Put(k string, v int) { c.entries[k] = v }

func nilMap() {
	var c Cache
	c.Put("session-1", 3)
}

func indexRange() {
	parts := []string{"a", "b"}
	fmt.Println(pick(parts, 5))
}

func pick(xs []string, i int) string { return xs[i] }

type Config struct{ Endpoint *string }

func nilPointer() {
	var cfg *Config
	fmt.Println(len(*cfg.Endpoint))
}

func workerPanic() {
	var wg sync.WaitGroup
	results := make(chan int)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			results <- parse(fmt.Sprintf("%dx", n))
		}(i)
	}
	time.Sleep(100 * time.Millisecond)
	wg.Wait()
}

func parse(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Errorf("parse worker input: %w", err))
	}
	return n
}

func deadlock() {
	var mu sync.Mutex
	done := make(chan struct{})
	for i := 0; i < 2; i++ {
		go func() {
			mu.Lock()
			<-done
		}()
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
}

func jsonPanic() {
	var out map[string]any
	if err := json.Unmarshal([]byte(`{"tool": "search", "args": }`), &out); err != nil {
		panic(err)
	}
}

func main() {
	scenarios := map[string]func(){
		"nil_map": nilMap, "index_range": indexRange, "nil_pointer": nilPointer,
		"worker_panic": workerPanic, "deadlock": deadlock, "json_panic": jsonPanic,
	}
	scenarios[os.Args[1]]()
}
