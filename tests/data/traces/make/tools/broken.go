package main

import (
	"fmt"
	"os"
)

func main() {
	cfg, err := loadConfig("agent.toml")
	fmt.Println(cfg.Endpoint)
}
