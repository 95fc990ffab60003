package lease_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
)

// TestNilLockerPanicsNamingTheMethod: every exported method of a nil
// *Locker, of both kinds, panics with a message that names the method and
// the nil *Locker, not with a bare nil dereference.
func TestNilLockerPanicsNamingTheMethod(t *testing.T) {
	for _, nilLocker := range []any{(*efficiency.Locker)(nil), (*correctness.Locker)(nil)} {
		v := reflect.ValueOf(nilLocker)
		for i := range v.NumMethod() {
			m, name := v.Method(i), v.Type().Method(i).Name
			t.Run(fmt.Sprintf("%T.%s", nilLocker, name), func(t *testing.T) {
				args := make([]reflect.Value, m.Type().NumIn())
				for k := range args {
					args[k] = reflect.Zero(m.Type().In(k))
				}
				if m.Type().IsVariadic() {
					args = args[:len(args)-1]
				}
				msg := func() (msg string) {
					defer func() { msg = fmt.Sprint(recover()) }()
					m.Call(args)
					return "no panic"
				}()
				if !strings.Contains(msg, name+" called on a nil *Locker") {
					t.Errorf("got %q; want a panic that names %s and the nil *Locker", msg, name)
				}
			})
		}
	}
}
