// ESLint (flat config): the recommended rules of ESLint and typescript-eslint that need no type information,
// and a few of our own. The toolchain lives in tools/lint (its own TypeScript 5.9: typescript-eslint 8 cannot
// parse with the project's TypeScript 7), hence the packages are required from there.
import { createRequire } from 'node:module';

const require = createRequire(new URL('./tools/lint/package.json', import.meta.url));
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const globals = require('globals');

export default tseslint.config(
  { ignores: ['**/node_modules/', '.data/', '**/dist/', 'bench/results/', 'docs/*.pdf', 'sdk/src/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { ...globals.node, ...globals.mocha } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': 'off',
      'no-empty': ['error', { allowEmptyCatch: true }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // test doubles and JSON bodies of unknown shape read as `any` on purpose
      '@typescript-eslint/no-explicit-any': 'off',
      // the validators match control characters on purpose (JSON whitespace, NUL in names)
      'no-control-regex': 'off',
    },
  },
  {
    // chai's property assertions: expect(x).to.be.an('array').that.is.not.empty
    files: ['test/**/*.ts', 'bench/**/*.ts', 'sdk/test/**/*.ts'],
    rules: { '@typescript-eslint/no-unused-expressions': 'off' },
  },
);
