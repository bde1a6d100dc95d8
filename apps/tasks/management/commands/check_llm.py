import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from apps.engine.config import ConfigError
from apps.engine.llm import Gateway
from apps.engine.llm.probe import PROBE_PROMPT, ProbeResult, probe_model, probe_structured
from apps.tasks.conf import agent_config
from apps.tasks.run.agent_check import agent_check, agent_report


class Command(BaseCommand):
    help = (
        "Send one short prompt to each configured model alias (or the one named) and print the "
        "reply, usage (cached tokens included), time to first token and total latency. Exits "
        "non-zero when any alias fails. With --agent: run one tiny agent task (fix a one-line "
        "bug so a test passes) on llm.main or --model, and report whether the model called "
        "tools with valid arguments, fixed the bug and passed the test, at what cost; the model's "
        "text streams as it arrives, and a run that stops names the cause (too slow, with its "
        "tokens/s; rambling; no tool call)."
    )
    requires_system_checks = []  # reports configuration problems itself, in one line each

    def add_arguments(self, parser):
        parser.add_argument("--model", metavar="ALIAS", help="check only this alias")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")
        parser.add_argument("--prompt", default=PROBE_PROMPT, help="the prompt to send")
        parser.add_argument(
            "--agent",
            action="store_true",
            help="run a tiny end-to-end agent task on the model (llm.main, or --model)",
        )

    def handle(self, *args, **options):
        try:
            config = agent_config()
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        aliases = sorted(config.models)
        if options["model"]:
            if options["model"] not in config.models:
                raise CommandError(
                    f"unknown model alias {options['model']!r}; configured: {', '.join(aliases)}"
                )
            aliases = [options["model"]]
        as_json = options["json"]
        if options["agent"]:
            self._agent(config, options["model"] or config.llm.main, as_json=as_json)
            return
        results = asyncio.run(self._check(config, aliases, options["prompt"], show=not as_json))
        if as_json:
            payload = {"ok": all(r.ok for r in results), "models": [r.as_dict() for r in results]}
            self.stdout.write(json.dumps(payload, indent=2))
        failed = [r.alias for r in results if not r.ok]
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(results)} model aliases failed: {', '.join(failed)}"
            )
        if not as_json:
            self.stdout.write(self.style.SUCCESS(f"{len(results)} of {len(results)} answered."))

    def _agent(self, config, alias: str, *, as_json: bool) -> None:
        if alias not in config.models:
            raise CommandError(f"llm.main names unknown alias {alias!r}")
        model = config.models[alias]
        if not as_json:
            self.stdout.write(
                f"agent check on {alias} ({model.provider} {model.model}): fix a one-line bug "
                f"so a test passes ...",
            )
            self.stdout.flush()
        progress = (  # the model's text as it arrives, a line per step
            None
            if as_json
            else (lambda text: (self.stdout.write(text, ending=""), self.stdout.flush()))
        )
        check = asyncio.run(agent_check(config, alias, progress=progress))
        if as_json:
            self.stdout.write(json.dumps(check.as_dict(), indent=2))
        else:
            self.stdout.write(agent_report(check))
        if not check.ok:
            raise CommandError(f"the agent check on {alias} failed: " + " ".join(check.problems))
        if not as_json:
            self.stdout.write(self.style.SUCCESS(f"PASS: {alias} works as an agent here."))

    async def _check(self, config, aliases, prompt, *, show):
        results = []
        async with Gateway(config) as gateway:
            for alias in aliases:
                if show:
                    model = config.models[alias]
                    self.stdout.write(f"{alias} ({model.provider} {model.model}) ... ", ending="")
                    self.stdout.flush()
                result = await probe_model(gateway, alias, prompt=prompt)
                if result.ok:  # which way the planner gets its JSON spec on this alias
                    result.structured_output = await probe_structured(gateway, alias)
                if show:
                    self._print(result)
                results.append(result)
        return results

    def _print(self, result: ProbeResult) -> None:
        if not result.ok:
            self.stdout.write(self.style.ERROR("FAILED"))
            self.stdout.write(f"  error    {result.error_type}: {result.error}")
            return
        usage = result.usage
        reply = " ".join(result.content.split())
        if len(reply) > 200:
            reply = reply[:199] + "…"
        retries = f" · {result.attempts} attempts" if result.attempts > 1 else ""
        self.stdout.write(self.style.SUCCESS("ok"))
        self.stdout.write(f"  reply    {reply}")
        self.stdout.write(
            f"  usage    input {usage.input_tokens} (cached {usage.cache_read_tokens}, "
            f"cache write {usage.cache_write_tokens}) · output {usage.output_tokens} · "
            f"cost ${result.cost:.6f}"
        )
        self.stdout.write(
            f"  latency  first token {result.first_token_ms:.0f} ms · total "
            f"{result.latency_ms:.0f} ms{retries}"
        )
        if result.structured_output:
            self.stdout.write(
                f"  structured output  {result.structured_output} (how the planner gets its "
                "spec: json_schema, a forced tool, or the prompt's words)"
            )
