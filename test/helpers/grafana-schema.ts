/**
 * A JSON Schema of the Grafana dashboard model as docs/operations/dashboard.json uses it, written from the
 * dashboard kind's generated types in @grafana/schema (raw/dashboard/x/types.gen: Dashboard, Panel, RowPanel,
 * GridPos, VariableModel, FieldConfigSource, ThresholdsConfig…); no npm package ships it as JSON Schema. It is
 * stricter than Grafana where a dashboard shipped for import should be: every field Grafana knows at the top
 * level and on a panel and no other (a misspelt key would be dropped silently on import), each panel with an
 * id, a title, a place on the grid and queries with a refId and an expression against the `${datasource}`
 * variable, so the dashboard imports into any Grafana with any Prometheus data source.
 */
const VARIABLE_TYPES = [
  'query',
  'adhoc',
  'groupby',
  'constant',
  'datasource',
  'interval',
  'textbox',
  'custom',
  'system',
  'snapshot',
  'switch',
];
const PANEL_TYPES = [
  'timeseries',
  'stat',
  'gauge',
  'bargauge',
  'table',
  'text',
  'state-timeline',
  'status-history',
  'heatmap',
  'piechart',
  'alertlist',
];
const COLOR_MODES = [
  'thresholds',
  'palette-classic',
  'palette-classic-by-name',
  'fixed',
  'shades',
  'continuous-GrYlRd',
  'continuous-RdYlGr',
  'continuous-BlYlRd',
  'continuous-YlRd',
  'continuous-BlPu',
  'continuous-YlBl',
  'continuous-blues',
  'continuous-reds',
  'continuous-greens',
  'continuous-purples',
];

const dataSourceVariable = {
  type: 'object',
  required: ['type', 'uid'],
  properties: { type: { const: 'prometheus' }, uid: { const: '${datasource}' } },
  additionalProperties: false,
};

const gridPos = {
  type: 'object',
  required: ['h', 'w', 'x', 'y'],
  properties: {
    h: { type: 'integer', minimum: 1 },
    w: { type: 'integer', minimum: 1, maximum: 24 },
    x: { type: 'integer', minimum: 0, maximum: 23 },
    y: { type: 'integer', minimum: 0 },
    static: { type: 'boolean' },
  },
  additionalProperties: false,
};

const thresholds = {
  type: 'object',
  required: ['mode', 'steps'],
  properties: {
    mode: { enum: ['absolute', 'percentage'] },
    steps: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['color', 'value'],
        properties: { color: { type: 'string' }, value: { type: ['number', 'null'] } },
      },
    },
  },
};

const fieldConfig = {
  type: 'object',
  required: ['defaults', 'overrides'],
  properties: {
    defaults: {
      type: 'object',
      properties: {
        unit: { type: 'string' },
        decimals: { type: 'number' },
        min: { type: 'number' },
        max: { type: 'number' },
        color: { type: 'object', required: ['mode'], properties: { mode: { enum: COLOR_MODES } } },
        thresholds,
        mappings: {
          type: 'array',
          items: {
            type: 'object',
            required: ['type', 'options'],
            properties: { type: { enum: ['value', 'range', 'regex', 'special'] }, options: { type: 'object' } },
          },
        },
        custom: { type: 'object' },
      },
    },
    overrides: {
      type: 'array',
      items: {
        type: 'object',
        required: ['matcher', 'properties'],
        properties: {
          matcher: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
          properties: { type: 'array', items: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } },
        },
      },
    },
  },
};

const target = {
  type: 'object',
  required: ['refId', 'expr', 'datasource'],
  properties: {
    refId: { type: 'string', pattern: '^[A-Z]$' },
    expr: { type: 'string', minLength: 1 },
    datasource: dataSourceVariable,
    legendFormat: { type: 'string' },
    instant: { type: 'boolean' },
    range: { type: 'boolean' },
    editorMode: { enum: ['code', 'builder'] },
  },
};

const panel = {
  type: 'object',
  required: ['id', 'type', 'title', 'gridPos', 'datasource', 'targets', 'fieldConfig', 'options'],
  properties: {
    id: { type: 'integer', minimum: 1 },
    type: { enum: PANEL_TYPES },
    title: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    datasource: dataSourceVariable,
    gridPos,
    targets: { type: 'array', minItems: 1, items: target },
    fieldConfig,
    options: { type: 'object' },
    interval: { type: 'string' },
    maxDataPoints: { type: 'number' },
    transformations: {
      type: 'array',
      items: { type: 'object', required: ['id', 'options'], properties: { id: { type: 'string' }, options: {} } },
    },
    pluginVersion: { type: 'string' },
    links: { type: 'array' },
    transparent: { type: 'boolean' },
    timeFrom: { type: 'string' },
    timeShift: { type: 'string' },
    repeat: { type: 'string' },
    repeatDirection: { enum: ['h', 'v'] },
    maxPerRow: { type: 'number' },
  },
  additionalProperties: false,
};

const rowPanel = {
  type: 'object',
  required: ['id', 'type', 'title', 'collapsed', 'gridPos', 'panels'],
  properties: {
    id: { type: 'integer', minimum: 1 },
    type: { const: 'row' },
    title: { type: 'string', minLength: 1 },
    collapsed: { type: 'boolean' },
    gridPos,
    panels: { type: 'array', items: panel },
    repeat: { type: 'string' },
    datasource: dataSourceVariable,
  },
  additionalProperties: false,
};

const variable = {
  type: 'object',
  required: ['name', 'type'],
  properties: {
    name: { type: 'string', pattern: '^[a-zA-Z_][a-zA-Z0-9_]*$' },
    type: { enum: VARIABLE_TYPES },
    label: { type: 'string' },
    query: { anyOf: [{ type: 'string' }, { type: 'object' }] },
    definition: { type: 'string' },
    datasource: dataSourceVariable,
    current: { type: 'object' },
    options: { type: 'array' },
    hide: { enum: [0, 1, 2, 3] },
    refresh: { enum: [0, 1, 2] },
    sort: { type: 'integer', minimum: 0, maximum: 8 },
    includeAll: { type: 'boolean' },
    allValue: { type: 'string' },
    multi: { type: 'boolean' },
    regex: { type: 'string' },
    description: { type: 'string' },
    skipUrlSync: { type: 'boolean' },
  },
  additionalProperties: false,
};

export const dashboardSchema = {
  type: 'object',
  required: ['title', 'uid', 'schemaVersion', 'panels', 'templating', 'time', 'annotations'],
  properties: {
    id: { type: ['integer', 'null'] },
    uid: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,40}$' },
    title: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' } },
    // 39 is Grafana 11.0's; a dashboard of a newer schema than the Grafana loading it is not migrated down
    schemaVersion: { type: 'integer', minimum: 39, maximum: 42 },
    version: { type: 'integer', minimum: 0 },
    editable: { type: 'boolean' },
    graphTooltip: { enum: [0, 1, 2] },
    fiscalYearStartMonth: { type: 'integer', minimum: 0, maximum: 11 },
    liveNow: { type: 'boolean' },
    refresh: { type: 'string' },
    timezone: { type: 'string' },
    weekStart: { type: 'string' },
    links: { type: 'array' },
    time: { type: 'object', required: ['from', 'to'], properties: { from: { type: 'string' }, to: { type: 'string' } } },
    timepicker: { type: 'object' },
    templating: { type: 'object', required: ['list'], properties: { list: { type: 'array', items: variable } } },
    annotations: {
      type: 'object',
      required: ['list'],
      properties: {
        list: {
          type: 'array',
          items: {
            type: 'object',
            required: ['datasource', 'enable', 'iconColor', 'name'],
            properties: {
              datasource: { type: 'object' },
              enable: { type: 'boolean' },
              iconColor: { type: 'string' },
              name: { type: 'string' },
            },
          },
        },
      },
    },
    panels: {
      type: 'array',
      minItems: 1,
      items: { if: { type: 'object', properties: { type: { const: 'row' } }, required: ['type'] }, then: rowPanel, else: panel },
    },
  },
  additionalProperties: false,
};
