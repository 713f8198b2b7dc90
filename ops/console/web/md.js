// A small Markdown renderer for transcripts. It builds DOM nodes and text
// nodes only (it never parses HTML, never sets innerHTML), so markup in a
// message shows as its characters; a link keeps only an http, https or
// mailto address (javascript:, data: and the rest stay text).
'use strict';

(function () {
  const SAFE_URL = /^(https?:\/\/|mailto:)/i;

  function node(tag, cls, ...kids) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  }

  function link(text, url) {
    url = url.trim();
    if (!SAFE_URL.test(url)) return document.createTextNode(text === url ? url : '[' + text + '](' + url + ')');
    const a = node('a', 'md-link', text);
    a.href = url;
    a.rel = 'noopener noreferrer nofollow';
    a.target = '_blank';
    return a;
  }

  // inline renders `code`, **bold**, *em* / _em_, [text](url) and bare
  // http(s) addresses; everything else is text.
  const INLINE = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|(?<![\w*])\*([^*\n]+)\*(?!\w)|(?<![\w_])_([^_\n]+)_(?![\w_])|\[([^\]\n]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

  function inline(text) {
    const out = [];
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) out.push(document.createTextNode(text.slice(last, m.index)));
      if (m[1] !== undefined) out.push(node('code', '', m[1]));
      else if (m[2] !== undefined) out.push(node('strong', '', ...inline(m[2])));
      else if (m[3] !== undefined) out.push(node('em', '', ...inline(m[3])));
      else if (m[4] !== undefined) out.push(node('em', '', ...inline(m[4])));
      else if (m[5] !== undefined) out.push(link(m[5], m[6]));
      else if (m[7] !== undefined) out.push(link(m[7], m[7]));
      last = m.index + m[0].length;
    }
    if (last < text.length) out.push(document.createTextNode(text.slice(last)));
    return out;
  }

  // withBreaks keeps a paragraph's single line breaks.
  function withBreaks(lines) {
    const out = [];
    lines.forEach((l, i) => { if (i) out.push(document.createElement('br')); out.push(...inline(l)); });
    return out;
  }

  // render turns Markdown text into a fragment: fenced code blocks,
  // headings, lists, block quotes, rules and paragraphs.
  function render(text) {
    const frag = document.createDocumentFragment();
    const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
      if (fence) {
        const body = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
        i++; // the closing fence (or the end)
        const code = node('code', fence[2] ? 'lang-' + fence[2] : '', body.join('\n'));
        frag.append(node('pre', 'md-code', code));
        continue;
      }
      if (!line.trim()) { i++; continue; }
      const h = line.match(/^(#{1,6})\s+(.*)$/);
      if (h) { frag.append(node('h' + Math.min(h[1].length + 3, 6), 'md-h', ...inline(h[2]))); i++; continue; }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { frag.append(document.createElement('hr')); i++; continue; }
      if (/^\s*>/.test(line)) {
        const body = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ''));
        frag.append(node('blockquote', '', render(body.join('\n'))));
        continue;
      }
      const item = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
      if (item.test(line)) {
        const ordered = /^\s*\d/.test(line);
        const list = document.createElement(ordered ? 'ol' : 'ul');
        while (i < lines.length && item.test(lines[i])) {
          const li = node('li', '', ...inline(lines[i].match(item)[2]));
          i++;
          // indented continuation lines belong to the item
          while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) {
            li.append(document.createElement('br'), ...inline(lines[i].trim()));
            i++;
          }
          list.append(li);
        }
        frag.append(list);
        continue;
      }
      const para = [lines[i++]]; // taken whatever it starts with, so the loop always moves on
      while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~)/.test(lines[i]) && !/^#{1,6}\s/.test(lines[i]) && !/^\s*>/.test(lines[i]) && !item.test(lines[i])) para.push(lines[i++]);
      frag.append(node('p', '', ...withBreaks(para)));
    }
    return frag;
  }

  window.renderMarkdown = render;
})();
