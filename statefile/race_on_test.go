//go:build race

package statefile

const raceEnabled = true
