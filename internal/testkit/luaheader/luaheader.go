// Package luaheader reads what the header of one of leasekit's Lua scripts
// documents, for the tests that hold Go code to it: the reply codes, which
// scripts/scripts.go says how to write.
package luaheader

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Codes returns the reply codes that the header of the script file at path
// lists, sorted, each once.
func Codes(path string) ([]int64, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Distinct(ReplyCodes(Header(string(src)))), nil
}

// codeLine is a line of a header's Reply section that lists a code: alone,
// or first in a table, indented two spaces past the prose.
var codeLine = regexp.MustCompile(`^-- {3}\{?(-?[0-9]+)[ ,}]`)

// ReplyCodes are the codes the Reply section of a script's header lists,
// in order.
func ReplyCodes(header []string) []int64 {
	var codes []int64
	reply := false
	for _, line := range header {
		reply = reply || strings.HasPrefix(line, "-- Reply")
		if m := codeLine.FindStringSubmatch(line); reply && m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			codes = append(codes, n)
		}
	}
	return codes
}

// Header is the header of the script src: its leading comment lines.
func Header(src string) []string {
	var lines []string
	for line := range strings.SplitSeq(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		lines = append(lines, line)
	}
	return lines
}

// Distinct is codes sorted, each once.
func Distinct(codes []int64) []int64 {
	codes = slices.Clone(codes)
	slices.Sort(codes)
	return slices.Compact(codes)
}
