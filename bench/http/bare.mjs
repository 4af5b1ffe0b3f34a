/* global Buffer */
// The baseline: a bare node:http server answering the exact bytes the service answered for each benchmarked
// request (captured by run.mjs), so the ratio measures what the framework, auth, rate limit and database cost.
import http from 'node:http';

const { list, get, create, faqList, faqGet } = JSON.parse(process.argv[2]);
const headers = (body) => ({ 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/v1/documents?')) {
    res.writeHead(200, headers(list));
    res.end(list);
  } else if (req.method === 'GET' && req.url.startsWith('/v1/documents/')) {
    res.writeHead(200, headers(get));
    res.end(get);
  } else if (req.method === 'GET' && req.url.startsWith('/v1/faqs?')) {
    res.writeHead(200, headers(faqList));
    res.end(faqList);
  } else if (req.method === 'GET' && req.url.startsWith('/v1/faqs/')) {
    res.writeHead(200, headers(faqGet));
    res.end(faqGet);
  } else if (req.method === 'POST') {
    // read the body, as the service must
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString());
      res.writeHead(201, headers(create));
      res.end(create);
    });
  } else {
    res.writeHead(404);
    res.end();
  }
});
server.keepAliveTimeout = 60_000;
// Port 0: run.mjs reads the port from this line, as it does from `parley serve --json`'s.
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${server.address().port}` })}\n`));
