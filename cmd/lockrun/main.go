package main

import (
	"os"

	"github.com/redis/go-redis/v9"
)

func main() {
	if os.Args[0] == guardianArg0 {
		os.Exit(guard(os.Args[1:]))
	}
	redis.SetLogger(quietRedis{})
	os.Exit(run(os.Args[1:], os.Environ(), stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}
