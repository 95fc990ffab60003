package model

// RaceEnabled says the tests run under the race detector (raceEnabled).
const RaceEnabled = raceEnabled
