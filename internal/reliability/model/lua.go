package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// luaRunner runs a script the way miniredis's EVAL does, on the same Lua
// interpreter (gopher-lua), with every redis.call dispatched to miniredis;
// but in one interpreter kept across scripts. miniredis builds a new one for
// every EVAL, opening its libraries each time, which costs most of a script's
// run; the checker runs hundreds of thousands. Each run gets fresh KEYS and
// ARGV, and may not create a global (as in Redis).
type luaRunner struct {
	l      *lua.LState
	protos map[string]*lua.FunctionProto
	do     func(cmd []string) any // a command's raw reply (server.ParseReply's)
}

func newLuaRunner(do func([]string) any) *luaRunner {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for name, open := range map[string]lua.LGFunction{
		lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable,
		lua.StringLibName: lua.OpenString, lua.MathLibName: lua.OpenMath,
	} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	r := &luaRunner{l: l, protos: make(map[string]*lua.FunctionProto), do: do}
	redis := l.NewTable()
	l.SetField(redis, "call", l.NewFunction(r.call(true)))
	l.SetField(redis, "pcall", l.NewFunction(r.call(false)))
	l.SetField(redis, "error_reply", l.NewFunction(errorReply))
	l.SetGlobal("redis", redis)
	guard := l.NewTable()
	l.SetField(guard, "__newindex", l.NewFunction(func(l *lua.LState) int {
		l.RaiseError("Script attempted to create global variable %s", l.Get(2).String())
		return 0
	}))
	l.SetMetatable(l.G.Global, guard)
	return r
}

// eval runs EVAL's arguments: source, the number of keys, keys, args.
func (r *luaRunner) eval(args []string) any {
	proto, err := r.compile(args[0])
	if err != nil {
		return replyError{"ERR Error compiling script: " + err.Error()}
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > len(args)-2 {
		return replyError{"ERR bad number of keys"}
	}
	l := r.l
	l.G.Global.RawSetString("KEYS", list(l, args[2:2+n]))
	l.G.Global.RawSetString("ARGV", list(l, args[2+n:]))
	l.Push(l.NewFunctionFromProto(proto))
	defer l.SetTop(0)
	if err := l.PCall(0, 1, nil); err != nil {
		return replyError{"ERR " + err.Error()}
	}
	return toReply(l.Get(-1))
}

func (r *luaRunner) compile(src string) (*lua.FunctionProto, error) {
	if p, ok := r.protos[src]; ok {
		return p, nil
	}
	chunk, err := parseLua(src)
	if err != nil {
		return nil, err
	}
	p, err := lua.Compile(chunk, "script")
	if err == nil {
		r.protos[src] = p
	}
	return p, err
}

func list(l *lua.LState, xs []string) *lua.LTable {
	t := l.CreateTable(len(xs), 0)
	for i, x := range xs {
		t.RawSetInt(i+1, lua.LString(x))
	}
	return t
}

// call is redis.call (raise: an error reply raises) or redis.pcall (it is
// returned as a table {err = ...}).
func (r *luaRunner) call(raise bool) lua.LGFunction {
	return func(l *lua.LState) int {
		var cmd []string
		for i := 1; i <= l.GetTop(); i++ {
			switch v := l.Get(i).(type) {
			case lua.LNumber, lua.LString:
				cmd = append(cmd, v.String())
			default:
				l.RaiseError("Lua redis lib command arguments must be strings or integers")
			}
		}
		if len(cmd) == 0 {
			l.RaiseError("Please specify at least one argument for this redis lib call")
		}
		reply := r.do(cmd)
		if e, ok := reply.(error); ok {
			if raise {
				l.RaiseError("%s", e.Error())
			}
			l.Push(errTable(l, e.Error()))
			return 1
		}
		l.Push(toLua(l, reply))
		return 1
	}
}

func errTable(l *lua.LState, msg string) *lua.LTable {
	t := l.NewTable()
	t.RawSetString("err", lua.LString(msg))
	return t
}

// errorReply is redis.error_reply: a message without an error code gets
// "ERR".
func errorReply(l *lua.LState) int {
	msg := strings.TrimPrefix(l.CheckString(1), "-")
	if !strings.Contains(msg, " ") {
		msg = "ERR " + msg
	}
	l.Push(errTable(l, msg))
	return 1
}

// toLua converts a reply into Lua as Redis does: nil is false, a status a
// table {ok = ...}.
func toLua(l *lua.LState, reply any) lua.LValue {
	switch v := reply.(type) {
	case nil:
		return lua.LFalse
	case int:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case server.Simple:
		t := l.NewTable()
		t.RawSetString("ok", lua.LString(v))
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for i, e := range v {
			t.RawSetInt(i+1, toLua(l, e))
		}
		return t
	}
	panic(fmt.Sprintf("model: a reply of type %T", reply))
}

// toReply converts a script's return value into a reply as Redis does: a
// number is truncated to an integer, true is 1, false nil, a table {err}
// an error, {ok} a status, any other an array up to its first nil.
func toReply(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LBool:
		if x {
			return int64(1)
		}
		return nil
	case lua.LNumber:
		return int64(x)
	case lua.LString:
		return string(x)
	case *lua.LTable:
		if e := x.RawGetString("err"); e != lua.LNil {
			return replyError{e.String()}
		}
		if ok := x.RawGetString("ok"); ok != lua.LNil {
			return ok.String()
		}
		var out []any
		for i := 1; ; i++ {
			e := x.RawGetInt(i)
			if e == lua.LNil {
				return append([]any{}, out...)
			}
			out = append(out, toReply(e))
		}
	}
	return nil
}

func parseLua(src string) ([]ast.Stmt, error) { return parse.Parse(strings.NewReader(src), "script") }
