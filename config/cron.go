package config

import (
	"fmt"
	"strings"
	"time"
)

// Cron is OpenClaw's `cron` section, the parts sessionbus reads: whether
// the workers run cron ticks at all, and the shortest interval a job may
// have.
type Cron struct {
	// Enabled false stops this worker's cron ticks (jobs stay stored).
	Enabled bool `mapstructure:"enabled"`
	// MinInterval is the floor of every and cron schedules ("" or 0: the
	// scheduler's own, one second).
	MinInterval string `mapstructure:"minInterval"`
}

// MinIntervalDuration is MinInterval as a duration (0 when unset).
func (c Cron) MinIntervalDuration() (time.Duration, error) {
	v := strings.TrimSpace(c.MinInterval)
	if v == "" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("cron.minInterval %q must be a duration such as 1m or 5m", c.MinInterval)
	}
	return d, nil
}

func (c Cron) validate() error {
	_, err := c.MinIntervalDuration()
	return err
}
