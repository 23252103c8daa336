"""Default workload names, apart from the API so that the CLI can show them without importing it."""

DEFAULT_SCENARIO = "frontier-agentic"
DEFAULT_RL_WORKLOAD = "rl-swe-agent"

CLI = "command line"  # the origin of a value given on the command line
