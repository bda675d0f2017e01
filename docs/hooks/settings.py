"""The settings page's tables, generated at each build from the flags the trainer declares for
Config's fields (ncae_cuda.commands.flags.add_settings): each setting's keyword, flag, help and
default as `python -m ncae_cuda.train --help` states them, so the page says what the code does."""
import argparse

from ncae_cuda.commands.flags import add_settings

MARKER = "<!-- settings: generated from the trainer's flags -->"


def settings_tables() -> str:
    parser = argparse.ArgumentParser(add_help=False)
    add_settings(parser)
    parts = []
    for group in parser._action_groups:
        if not group._group_actions:
            continue
        parts += [f"### {group.title.capitalize()}", "",
                  "| keyword | flag | what it sets |", "|---|---|---|"]
        parts += [f"| `{action.dest}` | `{action.option_strings[0]}` | "
                  f"{action.help.replace('|', '&#124;')} |" for action in group._group_actions]
        parts.append("")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return markdown.replace(MARKER, settings_tables()) if MARKER in markdown else markdown
