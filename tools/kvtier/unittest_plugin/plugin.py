"""helm-unittest-compatible pytest plugin: collection hooks are added here."""
