package main

import (
	"os"

	"github.com/redis/go-redis/v9"
)

func main() {
	redis.SetLogger(quietRedis{})
	os.Exit(run(os.Args[1:], os.Environ(), stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}
