/**
 * Which methods a path answers to, so a request with another method gets 405 and an `Allow`
 * header (RFC 9110 §15.5.6) instead of a 404 that says the resource does not exist.
 * Fastify's router matches a method first; this keeps its own table of route patterns.
 */
export class RouteMethods {
  private readonly routes: Array<{ pattern: RegExp; methods: Set<string> }> = [];

  add(url: string, methods: string | string[]): void {
    const source = url
      .split('/')
      .map((segment) => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const pattern = new RegExp(`^${source}$`);
    const existing = this.routes.find((r) => r.pattern.source === pattern.source);
    const list = (Array.isArray(methods) ? methods : [methods]).map((m) => m.toUpperCase());
    if (existing) for (const m of list) existing.methods.add(m);
    else this.routes.push({ pattern, methods: new Set(list) });
  }

  /** The methods of every route matching `path` (sorted; empty when no route matches). */
  allowed(path: string): string[] {
    const methods = new Set<string>();
    for (const route of this.routes) if (route.pattern.test(path)) for (const m of route.methods) methods.add(m);
    return [...methods].sort();
  }
}
