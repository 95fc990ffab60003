package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// stdio is the standard input, output and error lockrun uses and hands to
// the command.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// run is lockrun with its arguments (after the program name), its environment
// and its stdio; it returns the exit status.
func run(args, env []string, std stdio) int {
	cfg, err := parseArgs(args, env, std.err)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(std.err, "lockrun: %v\n%s\n", err, usageLine)
		return exitUsage
	}
	ctx := context.Background()
	client := newClient(cfg.redis)
	defer client.Close()
	switch {
	case cfg.status && cfg.limit > 0:
		return fail(std.err, printSemaphoreStatus(ctx, client, cfg, std.out))
	case cfg.status:
		return fail(std.err, printStatus(ctx, client, cfg, std.out))
	case cfg.breaks:
		return breakLock(ctx, client, cfg, std)
	}
	code, err := lockAndRun(ctx, client, cfg, env, std)
	if err != nil {
		return fail(std.err, err)
	}
	return code
}

// fail reports err, if any, and returns the exit status it calls for.
func fail(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "lockrun: %v\n", err)
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	return exitUnavailable
}

// newLogger logs the libraries' warnings (the correctness audit's findings, a
// refresh being retried) to stderr, without timestamps: cron and systemd add
// their own.
func newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
