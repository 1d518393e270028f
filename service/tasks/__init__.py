"""Background tasks: the interface through which the service hands work to workers (tasks_port), the task table
(task_runs) and its outbox (task_outbox)."""
