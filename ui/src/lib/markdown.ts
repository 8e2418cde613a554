// Model answers as markdown, made safe to put into the page.
//
// The model's text is untrusted (a tool result it read may have been written
// by anyone), so two layers stand between it and the DOM:
//   1. marked renders markdown with raw HTML turned back into text, images
//      turned into their alt text (no remote loads), and links kept only for
//      http, https and mailto;
//   2. DOMPurify then keeps only the tags and attributes listed below, so
//      whatever slips through the first layer still cannot run or load.
// Links open outside the app window (target=_blank), never in place of it.

import DOMPurify from 'dompurify';
import { Marked, type Tokens } from 'marked';

const SAFE_LINK = /^(?:https?:|mailto:)/i;

const escapeHtml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    // Raw HTML in the answer is shown as the text it is.
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
    // No image is fetched: the alt text (or the word "image") stands in for it.
    image({ text }: Tokens.Image): string {
      return `<span class="md-image">[image: ${escapeHtml(text || 'no description')}]</span>`;
    },
    link(this: { parser: { parseInline: (t: Tokens.Link['tokens']) => string } }, { href, title, tokens }: Tokens.Link): string {
      const inner = this.parser.parseInline(tokens);
      if (!SAFE_LINK.test(href.trim())) return inner;
      const t = title ? ` title="${escapeHtml(title)}"` : '';
      return `<a href="${escapeHtml(href.trim())}"${t}>${inner}</a>`;
    },
  },
});

const ALLOWED_TAGS = [
  'p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'strong', 'em', 'del', 'code', 'pre', 'blockquote',
  'ul', 'ol', 'li', 'a', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'span', 'input',
];
const ALLOWED_ATTR = ['href', 'title', 'class', 'start', 'align', 'type', 'checked', 'disabled'];

let hooked = false;
function purifier(): typeof DOMPurify {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        const href = node.getAttribute('href') ?? '';
        if (!SAFE_LINK.test(href)) node.removeAttribute('href');
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer nofollow');
      }
      // GFM task-list boxes are the only inputs allowed, and only as read-only marks.
      if (node.tagName === 'INPUT') {
        if (node.getAttribute('type') !== 'checkbox') node.remove();
        else node.setAttribute('disabled', '');
      }
    });
    hooked = true;
  }
  return DOMPurify;
}

/** Renders markdown to HTML that carries no script, no remote load and no raw HTML. */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text) as string;
  return purifier()
    .sanitize(html, { ALLOWED_TAGS, ALLOWED_ATTR, ALLOW_DATA_ATTR: false })
    .trim();
}
