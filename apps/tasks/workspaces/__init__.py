"""Workspaces and their changes: workspaces created from a server directory, a git URL or an
upload, and the demo's reset (`workspaces`); repository workspaces (`repositories`); what a task
changed in its workspace, and reverting it (`changes`); a repository task's work handed back:
its branch's changes, the patch, merge and push (`handoffs`).

State changes go through the task services (`apps.tasks.services`); git through `apps.tasks.vcs`.
"""
