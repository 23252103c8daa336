"""The built-in ipd catalog (YAML), installed as the ``ipd_cli.configs`` package."""
