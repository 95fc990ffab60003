package model

// RaceEnabled says the tests run under the race detector (raceEnabled).
const RaceEnabled = raceEnabled

// DrawEarly and Unchecked plant bugs in cfg's mirror of the Go client under
// Config.Source: it draws its token as its acquire begins, before any grant;
// or it takes any reply of its stamp for held.
func DrawEarly(cfg Config) Config { cfg.drawEarly = true; return cfg }

// Unchecked: see DrawEarly.
func Unchecked(cfg Config) Config { cfg.unchecked = true; return cfg }
