package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Defaults, OpenClaw's where it has the key (docs/config.md lists them all).
const (
	DefaultVisibility          = "tree"
	DefaultMaxPingPongTurns    = 5
	MaxPingPongTurnsLimit      = 20
	DefaultMaxSpawnDepth       = 1
	DefaultMaxChildrenPerAgent = 5
	DefaultArchiveAfterMinutes = 60
	DefaultSubagentConcurrency = 8
	DefaultMaxDiskBytes        = "10gb"
	DefaultContextCacheBytes   = "64mb"
	DefaultResetMode           = "daily"
	DefaultResetAtHour         = 4
	DefaultMaintenanceMode     = "warn"
	DefaultPruneAfter          = "30d"
	DefaultMaxEntries          = 5000
)

var defaults = map[string]any{
	"bus.prefix":                                     "sb",
	"messages.queue.mode":                            DefaultQueueMode,
	"messages.queue.debounceMs":                      DefaultQueueDebounceMs,
	"messages.queue.cap":                             DefaultQueueCap,
	"messages.queue.drop":                            DefaultQueueDrop,
	"bus.replicas":                                   1,
	"bus.maxRunHops":                                 16,
	"bus.runRecordMaxAge":                            "168h",
	"bus.deliverMaxAge":                              "168h",
	"bus.announceRetries":                            5,
	"bus.subagentSweepInterval":                      "2s",
	"bus.contextCacheBytes":                          DefaultContextCacheBytes,
	"tools.sessions.visibility":                      DefaultVisibility,
	"tools.agentToAgent.enabled":                     false,
	"tools.agentToAgent.allow":                       []string{},
	"tools.profile":                                  "",
	"tools.alsoAllow":                                []string{},
	"tools.allow":                                    []string{},
	"tools.deny":                                     []string{},
	"session.mainKey":                                "main",
	"session.scope":                                  "per-sender",
	"session.dmScope":                                "main",
	"session.agentToAgent.maxPingPongTurns":          DefaultMaxPingPongTurns,
	"session.maintenance.mode":                       DefaultMaintenanceMode,
	"cron.enabled":                                   true,
	"cron.minInterval":                               "",
	"session.maintenance.pruneAfter":                 DefaultPruneAfter,
	"session.maintenance.maxEntries":                 DefaultMaxEntries,
	"session.maintenance.resetArchiveRetention":      "false",
	"session.maintenance.maxDiskBytes":               DefaultMaxDiskBytes,
	"session.maintenance.highWaterBytes":             "",
	"session.reset.mode":                             DefaultResetMode,
	"session.reset.atHour":                           DefaultResetAtHour,
	"session.resetTriggers":                          []string{"/new", "/reset"},
	"session.notices.wakeSubagents":                  false,
	"session.threadBindings.enabled":                 true,
	"session.threadBindings.idleHours":               DefaultThreadBindingIdleHours,
	"session.threadBindings.maxAgeHours":             DefaultThreadBindingMaxAgeHours,
	"session.threadBindings.spawnSessions":           true,
	"session.threadBindings.defaultSpawnContext":     DefaultSpawnContext,
	"agents.defaults.subagents.maxSpawnDepth":        DefaultMaxSpawnDepth,
	"agents.defaults.subagents.maxChildrenPerAgent":  DefaultMaxChildrenPerAgent,
	"agents.defaults.subagents.archiveAfterMinutes":  DefaultArchiveAfterMinutes,
	"agents.defaults.subagents.runTimeoutSeconds":    0,
	"agents.defaults.subagents.maxConcurrent":        DefaultSubagentConcurrency,
	"agents.defaults.subagents.allowAgents":          []string{},
	"agents.defaults.sandbox.sessionToolsVisibility": "spawned",
	"agents.defaults.model":                          "",
	"agents.defaults.sandbox.mode":                   "off",
	"agents.defaults.compaction.reserveTokens":       DefaultReserveTokens,
	"agents.defaults.compaction.keepRecentTokens":    DefaultKeepRecentTokens,
	"agents.defaults.compaction.reserveTokensFloor":  DefaultReserveTokensFloor,
	"logging.redactSensitive":                        "tools",
	"logging.redactPatterns":                         []string{},
	"commands.ownerAllowFrom":                        []string{},
	"search.includeTools":                            false,
	"quotas.toolCallsPerSession.rate":                defaultQuotas.ToolCallsPerSession.Rate,
	"quotas.toolCallsPerSession.burst":               defaultQuotas.ToolCallsPerSession.Burst,
	"quotas.toolCallsPerAgent.rate":                  defaultQuotas.ToolCallsPerAgent.Rate,
	"quotas.toolCallsPerAgent.burst":                 defaultQuotas.ToolCallsPerAgent.Burst,
	"quotas.runsPerSession.rate":                     defaultQuotas.RunsPerSession.Rate,
	"quotas.runsPerSession.burst":                    defaultQuotas.RunsPerSession.Burst,
	"quotas.runsPerAgent.rate":                       defaultQuotas.RunsPerAgent.Rate,
	"quotas.runsPerAgent.burst":                      defaultQuotas.RunsPerAgent.Burst,
}

var defaultQuotas = DefaultQuotas()

// Load reads path (or, when empty, sessionbus.yaml/.json/.json5 in the
// working directory if present), then SESSIONBUS_* environment variables,
// and validates. A .json or .json5 file is read as JSON5, so OpenClaw's
// openclaw.json loads as it is. Warnings (a value OpenClaw falls back on) are logged.
func Load(path string, log *slog.Logger) (*Config, error) {
	v := withDefaults()
	v.SetEnvPrefix("SESSIONBUS")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if log == nil {
		log = slog.Default()
	}
	if path == "" {
		path = findDefaultConfig()
	}
	if path != "" {
		v.SetConfigFile(path)
		read := v.ReadInConfig
		if isJSONConfig(path) {
			read = func() error { return readJSON5(v, path, log) }
		}
		if err := read(); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return decode(v, log)
}

// findDefaultConfig is the sessionbus.* file in the working directory that
// Load reads when given none: viper's order of extensions, then .json5.
func findDefaultConfig() string {
	for _, ext := range append(viper.SupportedExts, "json5") {
		p := "sessionbus." + ext
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Default is the configuration with no file and no environment.
func Default() *Config {
	c, err := decode(withDefaults(), nil)
	if err != nil {
		panic("config defaults do not validate: " + err.Error())
	}
	return c
}

func withDefaults() *viper.Viper {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	return v
}

func decode(v *viper.Viper, log *slog.Logger) (*Config, error) {
	if log == nil {
		log = slog.Default()
	}
	var c Config
	hook := mapstructure.ComposeDecodeHookFunc(mapstructure.StringToSliceHookFunc(","), mapstructure.StringToTimeDurationHookFunc())
	if err := v.Unmarshal(&c, viper.DecodeHook(hook)); err != nil {
		return nil, fmt.Errorf("config: %v (fix the named key in %s)", err, describe(v))
	}
	if err := decodeModels(v, &c); err != nil {
		return nil, fmt.Errorf("config: %w (fix it in %s)", err, describe(v))
	}
	if err := decodeToolMaps(v, &c); err != nil {
		return nil, fmt.Errorf("config: %w (fix it in %s)", err, describe(v))
	}
	if err := c.Validate(log); err != nil {
		return nil, fmt.Errorf("config: %w (fix it in %s)", err, describe(v))
	}
	return &c, nil
}

func describe(v *viper.Viper) string {
	if f := v.ConfigFileUsed(); f != "" {
		return f
	}
	return "the SESSIONBUS_* environment"
}
