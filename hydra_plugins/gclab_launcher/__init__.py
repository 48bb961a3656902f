"""gclab's Hydra launcher: ``hydra/launcher=ray`` runs a sweep's jobs as parallel Ray tasks."""
