package config

import (
	"bytes"
	"fmt"
	"log/slog"
)

// Parse reads a configuration from data in format (yaml or json) with the
// defaults under it, as Load reads a file, but without the environment:
// for configuration that arrives as bytes, and for fuzzing the loader.
func Parse(data []byte, format string, log *slog.Logger) (*Config, error) {
	v := withDefaults()
	v.SetConfigType(format)
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("config (%s): %w", format, err)
	}
	return decode(v, log)
}
