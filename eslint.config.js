import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The client library (parley/client) runs with no dependency: the global fetch and node: built-ins. Types may
    // come from the service's schemas; anything that would load at run time may not.
    files: ['src/client/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!node:|\\./)',
              allowTypeImports: true,
              message: 'src/client may load only node: built-ins and its own files at run time (use `import type` for the service\'s schemas).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // The dashboard's script runs in the browser as a classic script (src/modules/dashboard/assets).
    files: ['src/modules/dashboard/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'sessionStorage', 'fetch', 'crypto', 'URLSearchParams', 'Node'].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    // The chat widget runs in the owner's pages as a classic script (src/modules/widget/assets).
    files: ['src/modules/widget/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(
        ['window', 'document', 'URL', 'Promise', 'AbortController', 'CSSStyleSheet', 'Uint8Array', 'setTimeout', 'clearTimeout'].map((g) => [g, 'readonly']),
      ),
    },
  },
);
