import { describe, expect, it } from 'vitest';
import { renderMarkdown } from '../src/lib/markdown';

/** Parses rendered HTML into a detached element, as the page would hold it. */
function dom(md: string): HTMLElement {
  const el = document.createElement('div');
  el.innerHTML = renderMarkdown(md);
  return el;
}

describe('renderMarkdown', () => {
  it('renders the markdown a model writes: emphasis, lists, code, tables', () => {
    const el = dom('**eu-west** has *412* errors:\n\n- one `GET`\n- two\n\n```\nx < 1\n```\n\n| region | 5xx |\n| --- | --- |\n| eu-west | 412 |');
    expect(el.querySelector('strong')?.textContent).toBe('eu-west');
    expect(el.querySelector('em')?.textContent).toBe('412');
    expect([...el.querySelectorAll('li')].map((li) => li.textContent)).toEqual(['one GET', 'two']);
    expect(el.querySelector('pre code')?.textContent).toBe('x < 1\n');
    expect([...el.querySelectorAll('td')].map((td) => td.textContent)).toEqual(['eu-west', '412']);
  });

  it('shows raw HTML as text: a <script> never becomes an element', () => {
    const el = dom('before <script>window.pwned = 1</script> after\n\n<script>alert(1)</script>');
    expect(el.querySelector('script')).toBeNull();
    expect(el.textContent).toContain('<script>window.pwned = 1</script>');
    expect(el.textContent).toContain('<script>alert(1)</script>');
  });

  it('drops event handlers and inline HTML elements', () => {
    const el = dom('<div onclick="alert(1)">x</div> <iframe src="http://evil.example/"></iframe> <b onmouseover="x()">b</b>');
    expect(el.querySelector('[onclick],[onmouseover],iframe,div,b')).toBeNull();
  });

  it('loads no image, remote or not: the alt text stands in', () => {
    const el = dom('![chart of errors](http://evil.example/track.png) and <img src="https://evil.example/x.png" onerror="alert(1)">');
    expect(el.querySelector('img')).toBeNull();
    expect(el.querySelector('.md-image')?.textContent).toBe('[image: chart of errors]');
    expect(renderMarkdown('![x](data:image/png;base64,AAAA)')).not.toContain('<img');
  });

  it('neutralises javascript:, data: and vbscript: links, keeps http(s) and mailto opening outside the app', () => {
    for (const href of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)', 'data:text/html,<script>1</script>', 'vbscript:x']) {
      const el = dom(`[click](${href})`);
      expect(el.querySelector('a[href]'), href).toBeNull();
      expect(el.textContent, href).toContain('click');
    }
    const html = dom('<a href="javascript:alert(1)">raw</a>');
    expect(html.querySelector('a[href]')).toBeNull();
    const ok = dom('[docs](https://example.com/a?b=1) <mail@example.com>').querySelectorAll('a');
    expect([...ok].map((a) => a.getAttribute('href'))).toEqual(['https://example.com/a?b=1', 'mailto:mail@example.com']);
    for (const a of ok) {
      expect(a.getAttribute('target')).toBe('_blank');
      expect(a.getAttribute('rel')).toBe('noopener noreferrer nofollow');
    }
  });

  it('keeps plain text as one paragraph with its line breaks', () => {
    expect(renderMarkdown('eu-west, with 412.')).toBe('<p>eu-west, with 412.</p>');
    expect(renderMarkdown('a\nb')).toBe('<p>a<br>b</p>');
  });
});
