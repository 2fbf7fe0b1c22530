// Type-aware linting: typescript-eslint 8 needs TypeScript < 6.1, hence typescript@5.9 (docs/decisions.md).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

import { readdirSync } from 'node:fs';

// The domains: every folder of src/domains/ (docs/ARCHITECTURE.md), read from the tree, never listed by hand.
const DOMAINS = readdirSync(new URL('./src/domains/', import.meta.url), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

/** Imports of a layer's files that reach a layer it may not depend on (the picture in docs/ARCHITECTURE.md). */
const layer = (name, forbidden, allowTypeImports = false, except = []) => ({
  files: [`src/${name}/**/*.ts`],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        patterns: forbidden.map((f) => ({
          regex: `/${f}/${except.length > 0 ? `(?!(${except.map((e) => e.replace(/^[^/]+\//, '').replace(/[.]/g, '\\.')).join('|')})$)` : ''}`,
          allowTypeImports,
          message: `src/${name}/ may not depend on src/${f}/ (docs/ARCHITECTURE.md: programs → domains → access → platform)`,
        })),
      },
    ],
  },
});

export default tseslint.config(
  { ignores: ['dist/**', 'packages/*/dist/**', 'node_modules/**', '.data/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
      eqeqeq: 'error',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // chai's `expect(x).to.be.true` style is an expression statement.
      '@typescript-eslint/no-unused-expressions': 'off',
      // Tests read the service's answers as untyped JSON on purpose and assert their shape with chai;
      // typing every reply would restate the schemas the tests are checking.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // The development IdP shared by the tests and the demo: @peculiar/x509 is typed against the DOM's
    // WebCrypto types, which this Node project does not load, so its key objects read as unresolved.
    files: ['test/support/idp.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  {
    // Benchmarks print their figures.
    files: ['bench/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // The documentation's examples print what they did, as a reader's program would.
    files: ['docs/examples/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  // Layout rules of docs/ARCHITECTURE.md that a linter can hold.
  {
    // The environment is read in the configuration modules only; everything else gets typed settings.
    files: ['src/**/*.ts', 'keyvault/**/*.ts', 'migrations/**/*.ts'],
    ignores: ['src/platform/config/config.ts', 'keyvault/config.ts', 'src/programs/cli/config.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'read the environment in a config module (src/platform/config/config.ts, keyvault/config.ts, src/programs/cli/config.ts) and pass settings',
        },
      ],
    },
  },
  {
    // The contract (contract/) is what the API and the signer agree on; both load it, so it loads
    // nothing but itself: no package, no Node module, neither process's code.
    files: ['contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../src', '../src/**', '../keyvault', '../keyvault/**', '../**'], message: 'contract/ imports nothing outside contract/' },
            { group: ['node:*'], message: 'contract/ imports no Node module: both processes load it as it is' },
            { regex: '^(?!node:)[^.]', message: 'contract/ imports no package' },
          ],
        },
      ],
    },
  },
  {
    // The signer is its own program: it shares no code with the API (the contract is not code of either).
    files: ['keyvault/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/src/**', '../src', '../../src'], message: 'keyvault/ must not import from src/' }] }],
    },
  },
  {
    // The API knows the signer by the contract only (contract/): none of the signer's code runs in
    // the API's process but through its own entry point (ROLE=all starts it by a dynamic import).
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/keyvault', '**/keyvault/**'], message: 'src/ imports nothing from keyvault/: what it shares with the signer is in contract/' },
          ],
        },
      ],
    },
  },
  // A domain reaches another domain through its commands and modules, never its repository (row
  // types excepted); its route declarations hand the work to commands: no SQL, no repository at all.
  ...DOMAINS.flatMap((domain) => {
    const foreign = {
      group: DOMAINS.filter((d) => d !== domain).map((d) => `**/${d}/repository.js`),
      allowTypeImports: true,
      message: `src/domains/${domain}/ may not use another domain's repository; call its commands, or resolve the tenant in src/access/tenancy/`,
    };
    const routes = {
      group: ['./repository.js', '**/db/*', 'knex'],
      allowTypeImports: true,
      message: 'a route declaration calls commands; queries live in repositories',
    };
    return [
      { files: [`src/domains/${domain}/**/*.ts`], rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [foreign] }] } },
      {
        files: [`src/domains/${domain}/**/routes.ts`, `src/domains/${domain}/**/*-routes.ts`, `src/domains/${domain}/failed-deliveries.ts`],
        rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [foreign, routes] }] },
      },
    ];
  }),
  // The layers: the platform knows no access rule, domain or program; access knows no domain or
  // program but for row types; domains know no program. (The domain rules above come after.)
  layer('platform', ['access', 'domains', 'programs'], true),
  // Authentication reads the credentials where their domains keep them: API tokens, project keys and
  // issuer bindings, and the signing-in user's wallet (one statement with the project).
  layer('access', ['domains', 'programs'], true, [
    'domains/tokens/repository.js',
    'domains/projects/keys.js',
    'domains/projects/issuer-binding.js',
    'domains/wallets/repository.js',
  ]),
  // The typed client is published on its own (packages/client, docs/client.md): its folder imports
  // nothing of the service and no Node module; no package either, but each adapter its library
  // (optional peer dependencies of the package). A later entry replaces the rule for its file.
  ...[
    ['src/programs/client/**/*.ts', []],
    ['src/programs/client/viem.ts', ['viem', 'viem/accounts']],
    ['src/programs/client/ethers.ts', ['ethers']],
  ].map(([files, packages]) => ({
    files: [files],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../*', 'node:*'], message: 'src/programs/client/ is a package of its own: it imports nothing outside its folder' },
            {
              regex: `^(?!\\.${packages.map((p) => `|${p.replace('/', '\\/')}$`).join('')})`,
              message: `src/programs/client/ imports no package${packages.length > 0 ? ` here but ${packages.join(', ')}` : ' (fetch is built in)'}`,
            },
          ],
        },
      ],
    },
  })),
  {
    // Migrations are fixed history: they never follow the application's code.
    files: ['migrations/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/src/**', '../src', '../../src'], message: 'migrations/ must not import from src/' }] }],
    },
  },
);
