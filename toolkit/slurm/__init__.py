"""Matrix arms as Slurm batch jobs (docs/slurm.md): scripts rendered from the specs (render), Slurm's commands
behind one wrapper (tools), and the Launcher that submits, watches and cancels a job (launcher)."""
