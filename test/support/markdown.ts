/** Reading Markdown the way GitHub renders it, for the documentation checks in test/tooling. */

/** Link targets of a Markdown text: [text](target), <https://…> autolinks and bare URLs; code blocks excluded. */
export function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  const targets = [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1] ?? '');
  const bare = [...prose.matchAll(/(?<!\]\()\bhttps?:\/\/[^\s)>\]]+/g)].map((m) => m[0]);
  return [...new Set([...targets, ...bare])];
}

/** GitHub's heading anchors of a Markdown file. */
export function anchorsOf(markdown: string): Set<string> {
  const headings = markdown.replace(/```[\s\S]*?```/g, '').match(/^#{1,6} .+$/gm) ?? [];
  return new Set(headings.map((h) => h.replace(/^#+ /, '').trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')));
}
